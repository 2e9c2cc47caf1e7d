"""Span records to the official OpenTelemetry SDK: ReadableSpans, the OTLP exporters, OTLP JSON lines.

Imported only by `acp-relay otel` (the SDK and protobuf cost about 0.2 s to import, which no other command
should pay). The exporters read the standard OTEL_EXPORTER_OTLP_* variables themselves (endpoint, headers,
timeout, certificates, compression); what we add is the choice of protocol and a base --endpoint.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .. import __version__
from ..protocol.spans import SCHEMA_URL, SCOPE, SpanRecord

PROTOCOLS = ("http/protobuf", "grpc")
BATCH = 512  # spans per export request (the SDK's batch processor's default)
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
_SCOPE = InstrumentationScope(SCOPE, __version__, SCHEMA_URL)


class ExportError(Exception):
    """The exporter cannot be made (an unknown protocol, gRPC support not installed)."""


def readable_spans(spans: Iterable[SpanRecord], resource: dict[str, Any]) -> list[ReadableSpan]:
    """The SDK's read-only spans, with our ids and the frames' times (no tracer: it would make its own)."""
    # OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME win, as everywhere; not Resource.create, whose random
    # service.instance.id would make each export of a session a different resource
    res = Resource(resource).merge(OTELResourceDetector().detect())
    flags = TraceFlags(TraceFlags.SAMPLED)
    out = []
    for s in spans:
        parent = None
        if s.parent_id is not None:
            parent = SpanContext(s.trace_id, s.parent_id, is_remote=s.remote_parent, trace_flags=flags)
        status = Status(StatusCode.ERROR, s.status_message or None) if s.status == "error" else Status(StatusCode.UNSET)
        out.append(
            ReadableSpan(
                name=s.name,
                context=SpanContext(s.trace_id, s.span_id, is_remote=False, trace_flags=flags),
                parent=parent,
                resource=res,
                attributes=s.attributes,
                events=[Event(e.name, e.attributes, e.time_ns) for e in s.events],
                links=[Link(SpanContext(t, i, is_remote=True, trace_flags=flags)) for t, i in s.links],
                kind=_KINDS[s.kind],
                status=status,
                start_time=s.start_ns,
                end_time=s.end_ns,
                instrumentation_scope=_SCOPE,
            )
        )
    return out


def traces_json(spans: list[ReadableSpan]) -> bytes:
    """One line of OTLP JSON (a TracesData object, as the OTLP file exporter writes them): the protobuf
    mapping, with ids as hex strings and enums as numbers, as OTLP JSON requires."""
    data = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for rs in data.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                for holder in (span, *span.get("links", ())):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in holder:
                            holder[key] = base64.b64decode(holder[key]).hex()
    return orjson.dumps(data) + b"\n"


def traces_endpoint(endpoint: str) -> str:
    """--endpoint is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT: HTTP gets /v1/traces."""
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"


def make_exporter(
    endpoint: str | None,
    protocol: str | None,
    headers: dict[str, str] | None,
    timeout: float | None = None,
    why: Why | None = None,
) -> SpanExporter:
    """The OTLP exporter for the protocol asked for (else OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, else
    http/protobuf); a None endpoint, header or timeout leaves them to the standard variables."""
    protocol = (
        protocol
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(
            endpoint=traces_endpoint(endpoint) if endpoint else None,
            headers=headers,
            timeout=timeout,
            session=_watched_session(why or Why()),
        )
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError:
            raise ExportError(
                "gRPC export needs the gRPC exporter: pip install opentelemetry-exporter-otlp-proto-grpc "
                "(or use --protocol http/protobuf)"
            ) from None
        return GrpcExporter(endpoint=endpoint, headers=headers, timeout=timeout)
    raise ExportError(f"unknown OTLP protocol {protocol!r}: use http/protobuf or grpc")


class Why:
    """Why the last export failed, in a few words: the collector's HTTP status, the connection error, or
    else the exporter's own last log line (it reports failures only by logging them)."""

    def __init__(self) -> None:
        self.message: str | None = None

    def reset(self) -> None:
        self.message = None


class _Logged(logging.Handler):
    def __init__(self, why: Why) -> None:
        super().__init__(logging.WARNING)
        self.why = why

    def emit(self, record: logging.LogRecord) -> None:
        if self.why.message is None:
            try:
                self.why.message = record.getMessage()
            except Exception:
                self.why.message = str(record.msg)


def _watched_session(why: Why) -> Any:
    """A requests session (the HTTP exporter's public `session` parameter) that notes each failure."""
    import requests

    class Watched(requests.Session):
        def request(self, *args: Any, **kwargs: Any) -> requests.Response:
            try:
                response = super().request(*args, **kwargs)
            except requests.Timeout:
                why.message = "the collector did not answer in time"
                raise
            except requests.ConnectionError as exc:
                errno = re.search(r"\[Errno -?\d+\] ([^\"')]+)", str(exc))
                why.message = errno.group(1) if errno else "cannot connect to the collector"
                raise
            if response.status_code >= 300:
                why.message = f"the collector answered HTTP {response.status_code} {response.reason}".rstrip()
            return response

    return Watched()


@contextmanager
def quiet_sdk(why: Why) -> Iterator[Why]:
    """The SDK's own log lines off stderr (our diagnostics are one line each); `why` keeps the first."""
    logger = logging.getLogger("opentelemetry")
    handler = _Logged(why)
    saved = logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    try:
        yield why
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = saved


def send(exporter: SpanExporter, spans: list[ReadableSpan]) -> bool:
    """Export in batches; False at the first batch the collector did not take."""
    batches = (spans[i : i + BATCH] for i in range(0, len(spans), BATCH))
    return all(exporter.export(batch) is SpanExportResult.SUCCESS for batch in batches)
