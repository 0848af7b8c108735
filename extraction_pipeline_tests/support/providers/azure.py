"""Azure OpenAI chat completions, as Microsoft's REST reference documents them:
``POST /openai/deployments/{deployment}/chat/completions?api-version=YYYY-MM-DD[-preview]``.

Checks, beyond the OpenAI body rules: an ``api-key`` header (or an Entra ``Bearer`` token); an
``api-version`` query parameter (``json_schema`` response formats need 2024-08-01-preview or
later); a deployment that exists (its model decides the limits). Errors are Azure's: ``{"error":
{"code": "429", "message": "... Please retry after N seconds ..."}}`` with ``retry-after``; a
prompt stopped by the content filter is 400 ``code: content_filter`` with ``innererror``; an
answer stopped by it is ``finish_reason: content_filter``. Answers carry
``prompt_filter_results`` and ``content_filter_results``, and (like OpenAI)
``prompt_tokens_details.cached_tokens``; every answer sends Azure's
``x-ratelimit-remaining-requests`` / ``-tokens`` headers.
"""

from __future__ import annotations

import re
from typing import Any

from extraction_pipeline_tests.support.providers.base import Reply, Request, SentReply
from extraction_pipeline_tests.support.providers.openai import OPENAI_MODELS, OpenAICompatibleFake

_ROUTE = re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions$")
_VERSION = re.compile(r"^(\d{4}-\d{2}-\d{2})(-preview)?$")
FIRST_JSON_SCHEMA_VERSION = "2024-08-01"
_CLEAN = {
    "hate": {"filtered": False, "severity": "safe"},
    "self_harm": {"filtered": False, "severity": "safe"},
    "sexual": {"filtered": False, "severity": "safe"},
    "violence": {"filtered": False, "severity": "safe"},
}
_FLAGGED = {**_CLEAN, "violence": {"filtered": True, "severity": "high"}}


class AzureOpenAIFake(OpenAICompatibleFake):
    name = "azure"

    def __init__(self, deployments: dict[str, str] | None = None) -> None:
        super().__init__()
        # deployment name -> the OpenAI model it serves
        self.deployments = deployments or {"gpt-4o-mini": "gpt-4o-mini"}
        self.models = {name: OPENAI_MODELS[model] for name, model in self.deployments.items()}
        self.rate_limit_headers = {"x-ratelimit-remaining-requests": "999", "x-ratelimit-remaining-tokens": "199000"}

    @property
    def api_base(self) -> str:
        return self.origin

    def serves(self, request: Request) -> bool:
        return _ROUTE.match(request.path) is not None

    def model_of(self, request: Request) -> str:
        match = _ROUTE.match(request.path)
        return match.group("deployment") if match else ""

    def error(self, status: int, message: str, kind: str, code: str | None, param: str | None = None) -> dict[str, Any]:
        return {
            "error": {"code": code or str(status), "message": message, "param": param, "type": kind, "status": status}
        }

    def not_found(self, request: Request) -> SentReply:
        return SentReply(404, {"error": {"code": "404", "message": "Resource not found"}})

    def check_auth(self, request: Request) -> None:
        if not request.headers.get("api-key") and not request.headers.get("authorization", "").startswith("Bearer "):
            message = (
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key "
                "for an active subscription and use a correct regional API endpoint for your resource."
            )
            raise self.refuse(401, {"error": {"code": "401", "message": message}}, message)
        version = request.query.get("api-version", "")
        if not _VERSION.match(version):
            message = "Missing or unsupported api-version query parameter" if version else "Missing api-version"
            raise self.refuse(404, {"error": {"code": "404", "message": "Resource not found"}}, message)

    def check_model(self, request: Request) -> tuple[int, int]:
        deployment = self.model_of(request)
        if deployment not in self.models:
            message = (
                "The API deployment for this resource does not exist. If you created the deployment within the last "
                "5 minutes, please wait a moment and try again."
            )
            raise self.refuse(404, {"error": {"code": "DeploymentNotFound", "message": message}}, message)
        return self.models[deployment]

    def check_response_format(self, request: Request) -> None:
        super().check_response_format(request)
        fmt = request.body.get("response_format") or {}
        version = request.query.get("api-version", "")
        if fmt.get("type") == "json_schema" and version[:10] < FIRST_JSON_SCHEMA_VERSION:
            raise self.bad(
                f"response_format value as json_schema is enabled only for api versions {FIRST_JSON_SCHEMA_VERSION}-preview "  # noqa: E501 (the provider's message, verbatim)
                "and later",
                "response_format",
            )

    def error_reply(self, request: Request, reply: Reply) -> SentReply:
        kind = reply.error or {429: "rate_limit", 400: "invalid"}.get(reply.status, "")
        version = request.query.get("api-version", "")
        if kind == "rate_limit":
            message = reply.error_message or (
                f"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version {version} have "
                "exceeded token rate limit of your current AIServices S0 pricing tier. Please retry after 6 seconds. "
                "Please contact Azure support service if you would like to further increase the default rate limit."
            )
            return SentReply(429, {"error": {"code": "429", "message": message}}, {"retry-after": "6"})
        if kind == "filtered":
            message = reply.error_message or (
                "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. "
                "Please modify your prompt and retry. To learn more about our content filtering policies please read "
                "our documentation: https://go.microsoft.com/fwlink/?linkid=2198766"
            )
            return SentReply(
                400,
                {
                    "error": {
                        "message": message,
                        "type": None,
                        "param": "prompt",
                        "code": "content_filter",
                        "status": 400,
                        "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": _FLAGGED},
                    }
                },
            )
        return super().error_reply(request, reply)

    answer_fields = frozenset()

    def choice_extras(self, finish: str) -> dict[str, Any]:
        return {"content_filter_results": _FLAGGED if finish == "filtered" else _CLEAN}

    def body_extras(self) -> dict[str, Any]:
        return {
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _CLEAN}],
            "system_fingerprint": "fp_azure",
        }
