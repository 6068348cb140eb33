"""Shared fixtures. Servers bind to 127.0.0.1 on ports the OS picks."""
