# The native twin of _encoder.py (see _encoder_native.pyx): what other twins cimport.

# FrameEncoder(version).encode(frame, content_length=...), or None.
cpdef object encode(
    object frame, str version, frozenset commands, frozenset bodies, bint content_length
)
