"""The CLI's HTTP client for a running service."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from domain.errors import ServiceUnavailable


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message", f"HTTP {status}"))
        self.status = status
        self.body = body

    def __str__(self) -> str:
        hint = self.body.get("hint")
        message = self.body.get("message", f"HTTP {self.status}")
        return f"{message} (HTTP {self.status})" + (f"\nhint: {hint}" if hint else "")


class UpstreamClient:
    def __init__(self, base_url: str, timeout_s: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def request(self, method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise ServiceUnavailable(
                f"cannot reach upstream at {self.base_url} ({type(error).__name__})"
            ) from error
        try:
            body = response.json()
        except ValueError:
            body = {"message": response.text[:500]}
        if response.status_code >= 400 and response.status_code not in (207, 422):
            raise ApiError(response.status_code, body)
        return response.status_code, body

    def post(self, path: str, json: Any, **params: Any) -> tuple[int, dict[str, Any]]:
        return self.request("POST", path, json=json, params=params or None)

    def get(self, path: str, **params: Any) -> tuple[int, dict[str, Any]]:
        return self.request("GET", path, params=params or None)

    def stream_events(self, path: str, json: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        """POST and yield the server-sent events (`event`, decoded JSON `data`)."""
        import json as jsonlib

        try:
            with self._http.stream("POST", path, json=json) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError(response.status_code, response.json())
                event, data = "message", []
                for line in response.iter_lines():
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif not line and data:
                        yield event, jsonlib.loads("\n".join(data))
                        event, data = "message", []
        except httpx.TransportError as error:
            raise ServiceUnavailable(
                f"cannot reach upstream at {self.base_url} ({type(error).__name__})"
            ) from error

    def reachable(self) -> bool:
        try:
            self._http.get("/health", timeout=2.0)
        except httpx.TransportError:
            return False
        return True
