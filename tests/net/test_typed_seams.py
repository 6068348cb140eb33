"""The request seams are typed for the type checker, not only at run time (issue 19 point 1).

mypy (strict) checks a small client of the seams: what ``KafkaConnection.request`` returns is
the response its request names, and the handler registry refuses a handler whose request or
response is not the API's (also through a ``decode`` hook). If either seam fell back to
``Any``, the lines marked ``# error`` would pass and this test would fail.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mypy import api as mypy_api

CLIENT = textwrap.dedent(
    """
    from kmeta.net.connection import KafkaConnection
    from kmeta.net.dispatch import HandlerRegistry, RequestContext
    from kmeta.protocol.messages import describe_cluster as dc
    from kmeta.protocol.messages import metadata as md


    def handle(ctx: RequestContext[None], request: dc.DescribeClusterRequest) -> dc.DescribeClusterResponse:
        return dc.DescribeClusterResponse(version=request.version)


    def read(frame: bytes, version: int, pos: int) -> str:
        return "not a DescribeClusterRequest"


    def wire(registry: HandlerRegistry[None]) -> None:
        registry.register(dc.API, handle)
        registry.register(md.API, handle)  # error
        registry.register(dc.API, handle, decode=read)  # error


    async def ask(conn: KafkaConnection) -> None:
        answer: md.MetadataResponse = await conn.request(md.MetadataRequest(version=12))
        wrong: dc.DescribeClusterResponse = await conn.request(md.MetadataRequest(version=12))  # error
        print(answer, wrong)
    """
)


def test_mypy_sees_the_response_type_and_checks_handlers_against_their_api(tmp_path: Path) -> None:
    source = tmp_path / "client.py"
    source.write_text(CLIENT)
    expected = {n for n, line in enumerate(CLIENT.splitlines(), 1) if line.endswith("# error")}
    out, err, status = mypy_api.run(
        ["--strict", "--ignore-missing-imports", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(source)]
    )
    assert err == ""
    flagged = {int(m.group(1)) for m in re.finditer(r"^.*client\.py:(\d+): error:", out, re.M)}
    assert flagged == expected, out
    assert status == 1
