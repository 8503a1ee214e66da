"""A real OTLP/HTTP trace receiver for the tests: what an OpenTelemetry Collector's ``otlp``
receiver does on ``POST /v1/traces`` (protobuf in, ``ExportTraceServiceResponse`` out), decoded
with the ``opentelemetry-proto`` package, every request's raw bytes kept for grep tests.

``hang=True``: the receiver reads the request and never answers (a collector that stalls).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

__all__ = ["ExportedSpan", "OtlpReceiver"]

KINDS = {
    ProtoSpan.SPAN_KIND_SERVER: "server",
    ProtoSpan.SPAN_KIND_CLIENT: "client",
    ProtoSpan.SPAN_KIND_INTERNAL: "internal",
}


@dataclass(frozen=True)
class ExportedSpan:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    error: bool
    links: tuple[tuple[str, str], ...]
    resource: dict[str, Any]
    start_ns: int
    end_ns: int


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


@dataclass
class OtlpReceiver:
    hang: bool = False
    raw: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    spans: list[ExportedSpan] = field(default_factory=list)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        return app

    async def _traces(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.raw.append(body)
        self.headers.append(dict(request.headers))
        if self.hang:
            await asyncio.Event().wait()  # until the client gives up and the server closes
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        for resource_spans in message.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ExportedSpan(
                            name=span.name,
                            kind=KINDS.get(span.kind, str(span.kind)),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            error=span.status.code == span.status.STATUS_CODE_ERROR,
                            links=tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in span.links),
                            resource=resource,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        self._arrived.set()
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    async def wait_for(self, count: int, timeout_s: float = 10.0) -> list[ExportedSpan]:
        """Wait until at least ``count`` spans arrived; return them all."""
        async with asyncio.timeout(timeout_s):
            while len(self.spans) < count:
                self._arrived.clear()
                await self._arrived.wait()
        return list(self.spans)

    def trace(self, trace_id: str) -> list[ExportedSpan]:
        return [span for span in self.spans if span.trace_id == trace_id]


class GrpcOtlpReceiver:
    """The Collector's OTLP/gRPC ``TraceService/Export``, on a ``grpc.aio`` server (loopback)."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.metadata: list[dict[str, str]] = []
        self._server: Any = None
        self.port = 0

    async def start(self) -> None:
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        receiver = self

        class Servicer(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
            async def Export(
                self, request: ExportTraceServiceRequest, context: Any
            ) -> ExportTraceServiceResponse:
                receiver.requests.append(request)
                receiver.metadata.append(dict(context.invocation_metadata()))
                return ExportTraceServiceResponse()

        self._server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)

    def span_names(self) -> list[str]:
        return [
            span.name
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
