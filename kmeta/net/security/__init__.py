"""Security shared by every daemon: principals, SASL mechanisms, principal mapping, the authorizer.

Used by the broker and the controller alike (both serve authenticated listeners); nothing here
imports ``server`` or ``controller``.
"""
