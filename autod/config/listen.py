"""`metrics.listen`: HOST:PORT on a loopback address only (the metrics name paths, failures, fingerprints).

The rule the config model validates with, and the address the metrics server binds (autod.metrics.server)."""

from __future__ import annotations

import ipaddress


def parse_listen(value: str) -> tuple[str, int]:
    """`127.0.0.1:9464`, `[::1]:9464` or `localhost:9464` -> (host, port). ValueError says what is wrong.

    Port 0 takes any free port (`autod status` shows which)."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:9464")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError("the port must be a number from 0 to 65535")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            raise ValueError("the host must be a loopback address (127.0.0.1, ::1 or localhost)") from None
        if not loopback:
            raise ValueError(
                "the host must be a loopback address (127.0.0.1, ::1 or localhost): put a proxy with"
                " authentication in front to scrape from another machine"
            )
    return ("127.0.0.1" if host == "localhost" else host), int(port_text)
