"""The admin API, as the `campaigns` blueprint: create a campaign's config
(`POST /v1/campaigns`), read it with its ETag (`GET /v1/campaigns/<name>`, what every client
fetches), retire it, and issue ingest tokens (`POST /v1/tokens`). Writes need the admin
token."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from ldptel.client.campaign import NAME_PATTERN, CampaignConfig
from ldptel.client.errors import LdptelError
from ldptel.collector.auth import check_admin, create_token
from ldptel.collector.body import lone_surrogate
from ldptel.collector.errors import ApiError, bad_request
from ldptel.collector.instance import current
from ldptel.store.registry import CampaignRetiredError

blueprint = Blueprint("campaigns", __name__)


@blueprint.post("/v1/campaigns")
def create_campaign() -> tuple[Response, int]:
    collector = current()
    check_admin(request.headers.get("Authorization"), collector.config.admin_token)
    data = collector.json_body()
    check_campaign_text(data)
    try:
        config = CampaignConfig.from_dict(data)
    except LdptelError as error:
        raise bad_request(error.field, error.reason) from error
    except (TypeError, ValueError, OverflowError) as error:
        raise bad_request("config", "invalid campaign config") from error
    try:
        config_id, changed = collector.registry.create(config)
    except CampaignRetiredError as error:
        raise ApiError(
            409, "name", "retired campaign; choose a new name", code="retired_campaign"
        ) from error
    body = {"name": config.name, "config_id": config_id, "changed": changed}
    return jsonify(body), 201 if changed else 200


@blueprint.get("/v1/campaigns/<name>")
def get_campaign(name: str) -> Response:
    collector = current()
    campaign = collector.registry.campaign(name, fresh=True)
    if campaign is None:
        raise ApiError(404, "campaign", "unknown campaign", code="unknown_campaign")
    if campaign.retired:
        raise ApiError(410, "campaign", "retired campaign", code="retired_campaign")
    etag = f'"{campaign.config_id}"'
    cache = f"public, max-age={collector.config.config_max_age}"
    headers = {"ETag": etag, "Cache-Control": cache}
    if _etag_matches(request.headers.get("If-None-Match", ""), campaign.config_id):
        return Response(status=304, headers=headers)
    config = collector.registry.config(campaign.config_id)
    if config is None:
        raise ApiError(404, "campaign", "config missing from the registry", code="unknown_config")
    response = jsonify({**config.to_dict(), "config_id": campaign.config_id})
    response.headers.update(headers)
    return response


@blueprint.post("/v1/campaigns/<name>/retire")
def retire_campaign(name: str) -> Response:
    collector = current()
    check_admin(request.headers.get("Authorization"), collector.config.admin_token)
    if not collector.registry.retire(name):
        raise ApiError(404, "campaign", "unknown campaign", code="unknown_campaign")
    return jsonify(name=name, retired=True)


@blueprint.post("/v1/tokens")
def create_ingest_token() -> tuple[Response, int]:
    collector = current()
    check_admin(request.headers.get("Authorization"), collector.config.admin_token)
    data = collector.json_body()
    if not isinstance(data, dict) or not isinstance(data.get("app"), str):
        raise bad_request("app", "is required (a string)")
    if set(data) - {"app"}:
        raise bad_request(sorted(set(data) - {"app"})[0], "unknown field")
    token = create_token(collector.redis, data["app"])
    return jsonify(app=data["app"], token=token), 201


def check_campaign_text(data: object) -> None:
    """What the config parser lets through: a name with a trailing newline (its pattern ends
    in `$`), and lone surrogates, which no Redis key or UTF-8 text can hold."""
    where = lone_surrogate(data)
    if where is not None:
        raise bad_request(where, "holds a lone UTF-16 surrogate (not valid Unicode)")
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and not NAME_PATTERN.fullmatch(name):
        raise bad_request("name", "must match [a-z0-9][a-z0-9_-]{0,63}")


def _etag_matches(header: str, config_id: str) -> bool:
    """If-None-Match: `*` or a list of (possibly weak) entity tags."""
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in header.split(",")]
    return "*" in tags or config_id in tags
