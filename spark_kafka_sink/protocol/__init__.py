"""Kafka wire protocol, sans-IO: bytes in, bytes out. Never imports socket, ssl, threading, selectors or time."""
