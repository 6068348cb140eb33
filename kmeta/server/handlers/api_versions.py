"""ApiVersions (api key 18): versions 0-4, on every listener.

Behaviour:

* The api keys and ranges come from the handler registry only (``ctx.registry``), so what
  is advertised is exactly what the connection will decode and dispatch.
* A version above the one we serve is answered, without decoding the body, by a v0-encoded
  response with UNSUPPORTED_VERSION whose api keys hold ApiVersions' own range (KIP-511), so
  the client can retry with a version we know.
* v3+: ClientSoftwareName and ClientSoftwareVersion must match
  ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``; otherwise INVALID_REQUEST (still listing
  the api keys, as Kafka does).
* No features are advertised (ZooKeeper-mode broker); throttle time is always 0.

Versions:

* v1 adds throttle_time_ms.
* v2 is the same as v1 (throttling after the response).
* v3 is the first flexible version; the request adds the client software name/version, the
  response the tagged feature fields. The response header stays v0 for every version.
* v4 is the same as v3 (KAFKA-17011 lets feature min versions be 0).
"""

from __future__ import annotations

# Served exactly as the controller serves it: the one implementation is in kmeta.net.
from kmeta.net.api_versions import handle, register, unsupported_version

__all__ = ["handle", "register", "unsupported_version"]
