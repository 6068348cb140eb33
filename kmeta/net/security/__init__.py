"""Security shared by every daemon: SASL mechanisms, principal mapping, the authorizer (the
principal itself, :mod:`kmeta.net.principal`, sits below the connection that carries it).

Used by the broker and the controller alike (both serve authenticated listeners); nothing here
imports ``server`` or ``controller``.
"""
