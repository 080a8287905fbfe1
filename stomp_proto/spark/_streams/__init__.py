"""The ``stomp-streams`` family: RabbitMQ stream queues, read by offset ranges.

``_offsets`` holds the pure rules (offsets, ranges, routing, settings),
``_link`` the connections, ``_reader`` the planning and range reads,
``_writer`` the sink, ``_source`` the Spark ``DataSource``.  Only
``_source`` imports pyspark.
"""
