"""Minimal Django settings for the consumer's tests: no database, the in-memory
channel layer (one per test process; two apps on it stand for two processes), and
one that fails when told to (broken_layer.py)."""

from __future__ import annotations

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="stomp-proto-channels tests",
        INSTALLED_APPS=["channels"],
        DATABASES={},
        CHANNEL_LAYERS={
            "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"},
            "broken": {"BACKEND": "broken_layer.BrokenLayer"},
        },
        USE_TZ=True,
    )
    django.setup()
