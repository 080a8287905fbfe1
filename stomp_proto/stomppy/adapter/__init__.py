"""Connections over other transports than plain TCP (stomp.py's ``stomp.adapter``)."""

from __future__ import annotations

from . import multicast, ws

__all__ = ["multicast", "ws"]
