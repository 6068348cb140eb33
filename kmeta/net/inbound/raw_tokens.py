"""Raw SASL tokens: the frames of a connection after a SaslHandshake v0.

Kafka's SaslHandshake v0 is followed by the SASL tokens themselves, each size-prefixed with no
Kafka header, answered the same way, until the mechanism is done; then the frames are Kafka
requests again. The authenticator asks for this mode through
``ServerConnection.receive_raw_frames``; the connection keeps a :class:`RawTokens` while it
lasts and hands it every frame.
"""

from __future__ import annotations

from kmeta.net.hooks import RawFrameReceiver
from kmeta.net.inbound.answer_framing import Chunks
from kmeta.protocol.errors import FrameTooLargeError


class RawTokens:
    __slots__ = ("max_size", "receiver")

    def __init__(self, receiver: RawFrameReceiver, max_size: int) -> None:
        #: None once the authenticator is done (it says so from within a token)
        self.receiver: RawFrameReceiver | None = receiver
        self.max_size = max_size

    def answer(self, frames: list[bytes], start: int, out: Chunks) -> int:
        """Hand ``frames[start:]`` whole to the receiver while it is set; each answer goes to
        ``out`` size-prefixed, without a response header. The index of the first frame not
        handed (a Kafka request again). A token over ``max_size`` raises FrameTooLargeError;
        what the receiver raises goes through (ProtocolError: v0 has no error to answer)."""
        for i in range(start, len(frames)):
            receiver = self.receiver
            if receiver is None:
                return i
            token = frames[i]
            if len(token) > self.max_size:
                raise FrameTooLargeError(f"SASL token of {len(token)} bytes over {self.max_size}")
            challenge = receiver(token)
            out.append(len(challenge).to_bytes(4, "big") + challenge)
        return len(frames)
