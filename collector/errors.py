"""HTTP errors of the collector: a status, the field at fault and the reason, as JSON."""

from __future__ import annotations

from collections.abc import Mapping


class ApiError(Exception):
    """Answered as `{"error": {"field": ..., "reason": ...}}` with `status`.

    `code` is a short, bounded label for metrics and logs (never request data).
    """

    def __init__(
        self,
        status: int,
        field: str,
        reason: str,
        *,
        code: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {field}: {reason}")
        self.status = status
        self.field = field
        self.reason = reason
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, dict[str, str]]:
        return {"error": {"field": self.field, "reason": self.reason}}


def bad_request(field: str, reason: str, code: str = "invalid") -> ApiError:
    return ApiError(400, field, reason, code=code)


def unavailable(
    retry_after: int,
    reason: str = "storage unavailable, retry later",
    *,
    code: str = "redis_unavailable",
) -> ApiError:
    """The batch is not (or not durably enough) stored: the client should retry later."""
    return ApiError(503, "redis", reason, code=code, headers={"Retry-After": str(retry_after)})
