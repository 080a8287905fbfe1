# The C helpers that every native twin (_decoder_native.pyx, _events_native.pyx,
# _encoder_native.pyx, _connection_native.pyx) uses; cimported, never imported: it
# has no module of its own.  Each twin mirrors the pure module beside it and
# declares, in its TOUCHES, the private attributes of the pure classes it reads or
# writes (tests/test_native_touches.py checks those names on the pure build).

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM

cdef extern from *:
    # ``static inline``: each twin uses some of these, and a compiler warns of an
    # unused function only where it is plain ``static``.
    """
    /* Read and write a slot through its member descriptor, as object.__setattr__
       would, without the class's own __setattr__ (frozen dataclasses refuse). */
    static inline PyObject *stomp_slot_get(PyObject *descr, PyObject *obj) {
        return Py_TYPE(descr)->tp_descr_get(descr, obj, (PyObject *)Py_TYPE(obj));
    }
    static inline int stomp_slot_set(PyObject *descr, PyObject *obj, PyObject *value) {
        return Py_TYPE(descr)->tp_descr_set(descr, obj, value);
    }
    /* object.__new__(cls) for a class with neither __new__ nor __init__ of its own
       to run: the allocation, every slot NULL until set. */
    static inline PyObject *stomp_alloc(PyObject *cls) {
        PyTypeObject *type = (PyTypeObject *)cls;
        return type->tp_alloc(type, 0);
    }
    /* A tuple subclass's instance (Frame) of ``size`` items, all NULL until set. */
    static inline PyObject *stomp_alloc_items(PyObject *cls, Py_ssize_t size) {
        PyTypeObject *type = (PyTypeObject *)cls;
        return type->tp_alloc(type, size);
    }
    /* A tuple of two str (a header) cannot be part of a reference cycle: the
       collector need not look at it (it would untrack it itself, later). */
    static inline PyObject *stomp_pair(PyObject *name, PyObject *value) {
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) return NULL;
        Py_INCREF(name);
        PyTuple_SET_ITEM(pair, 0, name);
        Py_INCREF(value);
        PyTuple_SET_ITEM(pair, 1, value);
        PyObject_GC_UnTrack(pair);
        return pair;
    }
    /* For containers that can hold no reference cycle (see the callers). */
    static inline void stomp_untrack(PyObject *obj) {
        PyObject_GC_UnTrack(obj);
    }
    static inline const char *stomp_utf8(PyObject *text, Py_ssize_t *size) {
        return PyUnicode_AsUTF8AndSize(text, size);
    }
    """
    object stomp_slot_get(object descr, object obj)
    int stomp_slot_set(object descr, object obj, object value) except -1
    object stomp_alloc(object cls)
    object stomp_alloc_items(object cls, Py_ssize_t size)
    object stomp_pair(object name, object value)
    void stomp_untrack(object obj)
    const char *stomp_utf8(object text, Py_ssize_t *size) except NULL

cdef extern from "Python.h":
    bint PyUnicode_CheckExact(object)
    bint PyTuple_CheckExact(object)
    bint PyBytes_CheckExact(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    bint PyUnicode_IS_COMPACT_ASCII(object)
    object PyUnicode_New(Py_ssize_t, Py_UCS4)
    void *PyUnicode_DATA(object)
    Py_ssize_t PyTuple_GET_SIZE(object)
    PyObject *PyTuple_GET_ITEM(object, Py_ssize_t)

cdef enum:
    LF = 10
    CR = 13
    COLON = 58
    BACKSLASH = 92


cdef inline object new_frame(object frame_class, object command, object headers, object body):
    """``Frame(command, headers, body)``, without NamedTuple's Python-level __new__."""
    frame = stomp_alloc_items(frame_class, 3)
    Py_INCREF(command)
    PyTuple_SET_ITEM(frame, 0, command)
    Py_INCREF(headers)
    PyTuple_SET_ITEM(frame, 1, headers)
    Py_INCREF(body)
    PyTuple_SET_ITEM(frame, 2, body)
    return frame


cdef inline int byte_at(const unsigned char *data, Py_ssize_t size, Py_ssize_t i) except -2:
    """``data[i]``, checked: -1 past either end (the callers treat it as "not there")."""
    if 0 <= i < size:
        return data[i]
    return -1
