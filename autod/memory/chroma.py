"""chromadb plumbing: the client (embedded, or a server with a timeout, token, tenant, database),
the three collections, metadata chromadb accepts, and paging. Everything here blocks: it runs on
the memory thread (worker.py), never on the event loop.

chromadb 1.5's HTTP client is built with ``httpx.Client(timeout=None)`` and no setting changes
that, so a server that stops answering (SIGSTOP, a dead NAT entry) would hold a call forever. Two
things bound it: a probe of ``/api/v2/heartbeat`` with our own timeout before a client is built
(building one makes requests of its own), and the client's session timeout set right after. The
worker's deadline (worker.py) is the last line behind both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from autod.config.settings import MemoryConfig
from autod.memory import Tier

TIERS = (Tier.N0, Tier.N1, Tier.N2)
PAGE = 1000  # rows per get/delete call: one short job on the memory thread


class StoreUnavailable(RuntimeError):
    """The store cannot be reached or refused us; the message says which and what to change."""


@dataclass
class Connection:
    client: Any
    location: str  # the path or the URL, for status and errors (never the token)
    disk_path: Path | None  # embedded store only


def collection_names(prefix: str, instance: str | None = None) -> dict[Tier, str]:
    """The collections a daemon uses: ``<prefix>n0``, ``n1``, ``n2``.

    In a shared store (instance given) observations and episodes, which no other daemon reads,
    live in collections of their own (``<prefix>n0.<instance>``): no query ever needs a filter
    on the owner, and chromadb's metadata filters cost a scan of the whole collection (at 100k
    items, a recall went from ~30 ms to ~330 ms). Lessons are what daemons share: one
    collection, ``<prefix>n2``, with the owner in each item's metadata.
    """
    own = f".{instance}" if instance else ""
    return {Tier.N0: f"{prefix}n0{own}", Tier.N1: f"{prefix}n1{own}", Tier.N2: f"{prefix}n2"}


def other_daemons_collections(client: Any, prefix: str, instance: str) -> list[tuple[Tier, Any]]:
    """Other daemons' observation and episode collections (for a prune with prune_scope: all)."""
    mine = set(collection_names(prefix, instance).values())
    out = []
    for col in client.list_collections():
        for tier in (Tier.N0, Tier.N1):
            if col.name.startswith(f"{prefix}{tier.value}.") and col.name not in mine:
                out.append((tier, client.get_collection(col.name, embedding_function=None)))
    return out


def _settings(cfg: MemoryConfig | None = None, token: str | None = None, **extra: Any) -> Any:
    from chromadb.config import Settings

    auth: dict[str, Any] = {}
    if token:
        auth = {
            "chroma_client_auth_provider": "chromadb.auth.token_authn.TokenAuthClientProvider",
            "chroma_client_auth_credentials": token,
            "chroma_auth_token_transport_header": (
                "X-Chroma-Token"
                if cfg is not None and cfg.auth_header == "x-chroma-token"
                else "Authorization"
            ),
        }
    return Settings(anonymized_telemetry=False, allow_reset=False, **auth, **extra)


def connect(cfg: MemoryConfig, state_dir: Path, *, token: str | None, timeout_s: float) -> Connection:
    """The embedded store under state_dir/memory, or the configured server (probed first)."""
    if cfg.url:
        return _connect_server(cfg, token, timeout_s)
    import chromadb

    path = Path(state_dir) / "memory"
    path.mkdir(parents=True, exist_ok=True)
    client = chromadb.PersistentClient(path=str(path), settings=_settings())
    if not _default_namespace(cfg):
        _ensure_namespace(chromadb.AdminClient(client.get_settings()), cfg)
        client.set_tenant(cfg.tenant, database=cfg.database)
    return Connection(client=client, location=str(path), disk_path=path)


def _default_namespace(cfg: MemoryConfig) -> bool:
    return cfg.tenant == "default_tenant" and cfg.database == "default_database"


def server_address(url: str) -> tuple[str, int, bool]:
    parts = urlsplit(url)
    ssl = parts.scheme == "https"
    return parts.hostname or "127.0.0.1", parts.port or (443 if ssl else 8000), ssl


def _connect_server(cfg: MemoryConfig, token: str | None, timeout_s: float) -> Connection:
    import chromadb

    assert cfg.url is not None
    host, port, ssl = server_address(cfg.url)
    base = f"{'https' if ssl else 'http'}://{host}:{port}"
    probe(base, cfg, token, timeout_s)
    if not _default_namespace(cfg):
        admin_settings = _settings(
            cfg,
            token,
            chroma_api_impl="chromadb.api.fastapi.FastAPI",
            chroma_server_host=host,
            chroma_server_http_port=port,
            chroma_server_ssl_enabled=ssl,
        )
        admin = chromadb.AdminClient(admin_settings)
        bound_timeout(admin, timeout_s)
        _ensure_namespace(admin, cfg)
    try:
        client = chromadb.HttpClient(
            host=host,
            port=port,
            ssl=ssl,
            settings=_settings(cfg, token),
            tenant=cfg.tenant,
            database=cfg.database,
        )
    except ValueError as exc:  # chromadb turns connect errors and a missing tenant into ValueError
        raise StoreUnavailable(f"Chroma server {base}: {exc}") from None
    bound_timeout(client, timeout_s)
    return Connection(client=client, location=base, disk_path=None)


def probe(base: str, cfg: MemoryConfig, token: str | None, timeout_s: float) -> None:
    """GET the heartbeat (and, with a token, an authenticated path) within timeout_s, or raise."""
    import httpx

    headers = {}
    if token:
        headers = (
            {"X-Chroma-Token": token}
            if cfg.auth_header == "x-chroma-token"
            else {"Authorization": f"Bearer {token}"}
        )
    try:
        with httpx.Client(timeout=timeout_s, headers=headers) as http:
            resp = http.get(f"{base}/api/v2/heartbeat")
            if resp.status_code == 200:
                # The heartbeat is public on a token-checking proxy: ask for something that is not.
                resp = http.get(f"{base}/api/v2/tenants/{cfg.tenant}")
    except httpx.TimeoutException:
        raise StoreUnavailable(f"Chroma server {base} did not answer within {timeout_s:g} s") from None
    except httpx.HTTPError as exc:  # names the URL only: headers (the token) never reach a message
        raise StoreUnavailable(f"Chroma server {base} unreachable: {type(exc).__name__}") from None
    if resp.status_code in (401, 403):
        raise StoreUnavailable(
            f"Chroma server {base} refused the token (HTTP {resp.status_code}): set memory.auth_token, "
            "memory.auth_token_file or the memory_token credential, and memory.auth_header"
        )
    if resp.status_code >= 500:
        raise StoreUnavailable(f"Chroma server {base} answered HTTP {resp.status_code}")


def bound_timeout(client: Any, timeout_s: float) -> None:
    """Give a chromadb HTTP client's httpx session a timeout (chromadb 1.5 builds it with none)."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        import chromadb

        raise StoreUnavailable(
            f"cannot set a timeout on chromadb {chromadb.__version__}'s HTTP client; "
            "install the chromadb version autod pins"
        )
    session.timeout = httpx.Timeout(timeout_s)


def _ensure_namespace(admin: Any, cfg: MemoryConfig) -> None:
    """Create memory.tenant and memory.database when missing (a fresh server, a new team)."""
    from chromadb.errors import NotFoundError

    try:
        admin.get_tenant(cfg.tenant)
    except NotFoundError:
        admin.create_tenant(cfg.tenant)
    try:
        admin.get_database(cfg.database, tenant=cfg.tenant)
    except NotFoundError:
        admin.create_database(cfg.database, tenant=cfg.tenant)


def open_collections(client: Any, prefix: str, instance: str | None = None) -> dict[Tier, Any]:
    # embedding_function=None: chromadb's default would download a model on first use.
    return {
        tier: client.get_or_create_collection(
            name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )
        for tier, name in collection_names(prefix, instance).items()
    }


def clean_metadata(metadata: Mapping[str, Any], now: float) -> dict[str, str | int | float | bool]:
    """Metadata chromadb accepts: scalars kept, None dropped, the rest as JSON; ``ts`` as epoch float."""
    out: dict[str, str | int | float | bool] = {}
    for key, value in metadata.items():
        if value is None:
            continue
        if isinstance(value, str | int | float | bool):
            out[str(key)] = value
        elif isinstance(value, datetime):
            out[str(key)] = value.timestamp()
        else:
            out[str(key)] = json.dumps(value, default=str, sort_keys=True)
    ts = out.get("ts")
    if isinstance(ts, str):  # chromadb cannot compare strings in filters: store epoch seconds
        try:
            ts = datetime.fromisoformat(ts).timestamp()
        except ValueError:
            ts = None
    out["ts"] = float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else now
    return out


def both(*clauses: dict[str, Any] | None) -> dict[str, Any] | None:
    """A where filter requiring every given clause (None clauses are left out)."""
    present = [c for c in clauses if c]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


def page(
    col: Any, where: dict[str, Any] | None, *, offset: int = 0, limit: int = PAGE, metadata: bool = False
) -> tuple[list[str], list[dict[str, Any]]]:
    """One page of ids (and metadata) matching where."""
    res = col.get(where=where, include=["metadatas"] if metadata else [], limit=limit, offset=offset)
    ids = list(res["ids"])
    metas = [m or {} for m in (res.get("metadatas") or [])] if metadata else [{} for _ in ids]
    return ids, metas
