"""The hand-off between the application's thread and the I/O loop.

What crosses between the two sides, and nothing else: the events the
application sends the loop (``events``: each completable one with a future and
an absolute deadline), the buffer the loop fills with completed fetches for the
application to decode (``fetch_buffer``), and the wake-up that ends a waiting
``poll`` (``wake``). Both ``_app/`` (the application side) and ``_net/`` (the
I/O shells) import this package; it imports neither, so no arrow runs from the
I/O shell to the application side.
"""
