"""The client machinery behind ``stomp_proto.asyncio``, ``.trio`` and ``.threads``.

* ``_core`` - what every client shares, without I/O: options, ids, the
  registry of subscriptions, routing of events, errors, the reconnect schedule.
* ``_backend`` - the interfaces the clients are written against (Backend,
  Stream, BlockingStream); imports no client.
* ``_async`` - the async client, written once for asyncio and trio;
  ``_async_connector`` - its sessions (each attempt, the reconnects, the
  end); ``_async_reader`` - the task that reads each session;
  ``_async_writer`` - its writing side (the write lock, waits for answers);
  ``_async_session`` - one attempt, as all three hold it; ``_asyncio`` and
  ``_trio`` - its two backends.
* ``_threads`` - the threads client (subscriptions, the background thread);
  ``_read_role`` - which of its threads reads the socket for the others;
  ``_writer`` - its writing side (locks, waits for answers); ``_outbox`` -
  the acknowledgements it holds back; ``_blocking`` - its sockets: TCP, TLS,
  WebSocket.
* ``_websocket_stream`` - STOMP over WebSocket for the async clients.

The sans-IO core (frames, codec, connection, WebSocket handshakes and
channel) never imports from here.
"""
