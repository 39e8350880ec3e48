"""Commands other packages add to ``ariadnemem``, and what such a command may use.

A package contributes a command through the entry-point group :data:`ENTRY_POINT_GROUP`
(``ariadnemem.cli``): the entry point's name is the command's name and its object a
function typer turns into the command (its parameters are the options)::

    [project.entry-points."ariadnemem.cli"]
    mcp = "ariadnemem_integrations.cli:mcp"

That is how ``ariadnemem mcp`` arrives from ``ariadnemem_integrations``: the core never
imports the integrations package. A contributed command should import its heavy or
optional dependencies inside the function, so listing the commands (``--help``) costs
nothing and a missing extra is reported only by the command that needs it.

The names re-exported here are the shared options and helpers of the core commands, so a
contributed command looks and fails like the others.
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

import typer

from ._common import (
    AgentOpt,
    HostOpt,
    PortOpt,
    SessionOpt,
    StoreOpt,
    UserOpt,
    err,
    fail,
    handle_errors,
    open_memory,
)

__all__ = ["ENTRY_POINT_GROUP", "AgentOpt", "HostOpt", "PortOpt", "SessionOpt", "StoreOpt", "UserOpt",
           "add_plugin_commands", "err", "fail", "open_memory"]

#: The entry-point group a package registers its commands in.
ENTRY_POINT_GROUP = "ariadnemem.cli"

log = logging.getLogger(__name__)


def add_plugin_commands(app: typer.Typer, *, taken: set[str] | None = None) -> list[str]:
    """Register every installed command of :data:`ENTRY_POINT_GROUP` on ``app``.

    A command that cannot be loaded (a broken or half-installed package) is skipped with
    a warning: the core commands keep working.

    Args:
        app: the ``ariadnemem`` application.
        taken: names of the core commands; a contributed command cannot replace one.

    Returns:
        The names of the commands added, in entry-point order.
    """
    added: list[str] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in (taken or set()) or ep.name in added:
            log.warning("ariadnemem: command %r from %s ignored: the name is taken", ep.name, ep.value)
            continue
        try:
            command = ep.load()
        except Exception as exc:  # any failure of a third-party import: report it, keep the CLI
            log.warning("ariadnemem: command %r from %s cannot be loaded: %s: %s", ep.name, ep.value,
                        type(exc).__name__, exc)
            continue
        app.command(ep.name)(handle_errors(command))
        added.append(ep.name)
    return added
