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


def resource_of(attributes: dict[str, Any]) -> Resource:
    """OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME win over ours, as everywhere. Not Resource.create:
    its random service.instance.id would make each export of a session a different resource."""
    return Resource(attributes).merge(OTELResourceDetector().detect())


def readable_spans(spans: Iterable[SpanRecord], resource: dict[str, Any]) -> list[ReadableSpan]:
    """The SDK's read-only spans, with our ids and the frames' times (no tracer: it would make its own)."""
    res = resource_of(resource)
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


def traces_json_sdk(spans: list[ReadableSpan]) -> bytes:
    """OTLP JSON by the SDK's own protobuf encoder and protobuf's JSON mapping (ids turned to hex, as OTLP
    JSON wants them): the reference the tests hold traces_json to; three times slower than it."""
    data = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for rs in data.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                for holder in (span, *span.get("links", ())):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in holder:
                            holder[key] = base64.b64decode(holder[key]).hex()
    return orjson.dumps(data) + b"\n"


_KIND_NUMBERS = {"internal": 1, "server": 2, "client": 3}
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # SpanFlags of the OTLP proto


def _json_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_json_value(v) for v in value]}} if value else {"arrayValue": {}}
    return {"stringValue": value}


def _json_attributes(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _json_value(v)} for k, v in attributes.items()]


def _json_span(s: SpanRecord) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": f"{s.trace_id:032x}", "spanId": f"{s.span_id:016x}"}
    if s.parent_id is not None:
        span["parentSpanId"] = f"{s.parent_id:016x}"
    span |= {
        "name": s.name,
        "kind": _KIND_NUMBERS[s.kind],
        "startTimeUnixNano": str(s.start_ns),
        "endTimeUnixNano": str(s.end_ns),
    }
    if s.attributes:
        span["attributes"] = _json_attributes(s.attributes)
    if s.events:
        span["events"] = [
            {
                "timeUnixNano": str(e.time_ns),
                "name": e.name,
                **({"attributes": _json_attributes(e.attributes)} if e.attributes else {}),
            }
            for e in s.events
        ]
    if s.links:
        flags = _HAS_IS_REMOTE | _IS_REMOTE
        span["links"] = [{"traceId": f"{t:032x}", "spanId": f"{i:016x}", "flags": flags} for t, i in s.links]
    span["status"] = (
        {"code": 2, **({"message": s.status_message} if s.status_message else {})} if s.status == "error" else {}
    )
    span["flags"] = _HAS_IS_REMOTE | (_IS_REMOTE if s.remote_parent else 0)
    return span


def traces_json(spans: list[SpanRecord], resource: dict[str, Any]) -> bytes:
    """One line of OTLP JSON (a TracesData object, as the OTLP file exporter writes them), written from
    the records directly: the same object traces_json_sdk makes of their ReadableSpans."""
    res = resource_of(resource)
    data = {
        "resourceSpans": [
            {
                "resource": {"attributes": _json_attributes(dict(res.attributes))} if res.attributes else {},
                "scopeSpans": [
                    {
                        "scope": {"name": _SCOPE.name, "version": _SCOPE.version},
                        "spans": [_json_span(s) for s in spans],
                        "schemaUrl": SCHEMA_URL,
                    }
                ],
            }
        ]
    }
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
        if self.why.message is not None:
            return
        try:
            text = record.getMessage()
        except Exception:
            text = str(record.msg)
        # the gRPC exporter's "Transient error StatusCode.UNAVAILABLE encountered while exporting traces to
        # HOST, retrying in 1.02s. Error details: ..." (or "Failed to export traces to HOST, error code:
        # StatusCode.UNAVAILABLE, error details: ...") in a few words
        code = re.search(r"StatusCode\.\w+", text)
        details = re.search(r"[Ee]rror details: (.*)", text, re.DOTALL)
        if code:
            text = code.group(0) + (f": {details.group(1)}" if details else "")
        text = " ".join(text.split())
        self.why.message = text if len(text) <= 160 else text[:159] + "…"


class Refused(Exception):
    """A refused connection, raised as what the exporter does not take for a transient connection error: it
    gives up at once instead of retrying until its timeout (a slow collector still gets the timeout)."""


def _refused(exc: BaseException) -> bool:
    """A ConnectionRefusedError anywhere in what requests and urllib3 wrapped around it."""
    seen: list[BaseException] = [exc]
    for e in seen:
        if isinstance(e, ConnectionRefusedError):
            return True
        if len(seen) < 16:
            more = [e.__cause__, e.__context__, getattr(e, "reason", None), *e.args]
            seen += [m for m in more if isinstance(m, BaseException) and m not in seen]
    return False


def _watched_session(why: Why) -> Any:
    """A requests session (the HTTP exporter's public `session` parameter) that notes the first failure: the
    exporter's retries after it (a retry that runs into the deadline times out) are its consequences."""
    import requests

    def note(message: str) -> None:
        if why.message is None:
            why.message = message

    class Watched(requests.Session):
        def request(self, *args: Any, **kwargs: Any) -> requests.Response:
            try:
                response = super().request(*args, **kwargs)
            except requests.Timeout:
                note("the collector did not answer in time")
                raise
            except requests.ConnectionError as exc:
                errno = re.search(r"\[Errno -?\d+\] ([^\"')]+)", str(exc))
                note(errno.group(1) if errno else "cannot connect to the collector")
                if _refused(exc):  # nothing listens: asking again only waits out the timeout
                    raise Refused(str(exc)) from exc
                raise
            if response.status_code >= 300:
                note(f"the collector answered HTTP {response.status_code} {response.reason}".rstrip())
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


def send(exporter: SpanExporter, spans: list[ReadableSpan], why: Why) -> bool:
    """Export in batches; False at the first batch the collector did not take, with `why` saying what that
    batch met first (a refusal an earlier batch's retry got past is not this one's)."""
    for i in range(0, len(spans), BATCH):
        why.reset()
        try:
            result = exporter.export(spans[i : i + BATCH])
        except Refused:  # an exporter that lets the session's exception through: `why` has it
            return False
        if result is not SpanExportResult.SUCCESS:
            return False
    return True
