"""The ``stomp`` family: a queue or topic, consumed and sent to over STOMP.

``_link`` holds the connections, ``_reader`` the read logic (micro-batches,
drains), ``_writer`` the sink's transactions, ``_source`` the Spark
``DataSource``.  Only ``_source`` imports pyspark.
"""
