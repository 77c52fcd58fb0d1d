"""Options a user changes on a running session: permission mode, model, reasoning effort,
where execute_code runs, the execution environment (where commands run, files live), and
whether the background review learns from it.

Front doors list them (`options`) in their own shape (ACP config options and modes, LSP
settings) and change them with `set_option`, which validates the value, applies it to the
session and its store, and emits `OptionChanged` through the session's door. A bad value
raises `OptionError` naming the valid ones; a model that cannot be used raises the provider
error (`AuthError` without credentials).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from talaria.agent.config import Config
from talaria.agent.modes import MODES, normalize_mode

if TYPE_CHECKING:
    from talaria.agent.session import Session

MODE_NAMES = {
    "default": ("Default", "Ask before edits and commands"),
    "accept_edits": ("Accept edits", "Edit project files without asking; commands ask"),
    "plan": ("Plan", "Read-only: no edits, no commands"),
    "auto": ("Auto", "No questions for project edits; commands run in the sandbox"),
    "dont_ask": ("Don't ask", "Never asks: refuses what was not approved before"),
}
EXEC_MODES = {"project": "the project (its own Python)", "strict": "a staging dir (Talaria's Python)"}
EFFORTS = ("default", "low", "medium", "high")


class OptionError(ValueError):
    """An unknown option or a value it does not take; the message lists the valid ones."""


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    name: str
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Option:
    id: str
    name: str
    category: str
    """ACP's config option category: mode, model, thought_level, or `_talaria_...`."""
    current: str
    choices: tuple[Choice, ...]


def mode_choices() -> tuple[Choice, ...]:
    return tuple(Choice(m, *MODE_NAMES[m]) for m in MODES)


@dataclass(frozen=True, slots=True)
class Values:
    """What the options show for one session: its current value of each."""

    mode: str
    model: str
    effort: str | None
    exec_mode: str
    learning: bool | None
    """None: the session has no skills state (no learning option)."""
    environment: str


def values(session: Session) -> Values:
    from talaria.tools.environments.base import environment_of

    ws = environment_of(session.workspace)
    skills = session.tool_state.skills
    return Values(session.permissions.mode, session.provider.name, session.reasoning_effort,
                  session.tool_state.exec_settings.mode,
                  skills.review if skills is not None else None,
                  ws.name if ws is not None else "local")


def opening_values(config: Config, model: str, mode: str, additional_dirs: int = 0) -> Values:
    """The values a new editor session opens with (`runtime.new_session`), from `config`
    alone: a door answers with them before the session is built. Its environment is the
    configured one, or local when that cannot be used (the host falls back the same way)."""
    from talaria.tools.environments.spec import resolve
    from talaria.tools.errors import EnvError

    try:
        spec = resolve(config.environment, config.environments)
        local = additional_dirs > 0 and spec.backend not in ("local", "docker", "singularity")
        environment = "local" if local else spec.label
    except EnvError:
        environment = "local"
    return Values(mode, model, config.reasoning_effort, config.exec_mode,
                  config.self_improvement, environment)


def options(session: Session, config: Config) -> list[Option]:
    return options_of(values(session), config)


def options_of(current: Values, config: Config) -> list[Option]:
    models = dict.fromkeys([current.model, *(config.model or "").split()[:1],
                            *config.fallback_models])
    return [
        Option("mode", "Mode", "mode", current.mode, mode_choices()),
        Option("model", "Model", "model", current.model,
               tuple(Choice(m, m) for m in models if m)),
        Option("reasoning_effort", "Reasoning effort", "thought_level",
               current.effort or "default",
               tuple(Choice(e, e.capitalize()) for e in EFFORTS)),
        Option("exec_mode", "execute_code runs in", "_talaria_exec", current.exec_mode,
               tuple(Choice(m, name) for m, name in EXEC_MODES.items())),
        *([Option("self_improvement", "Learn from this session", "_talaria_learning",
                  "on" if current.learning else "off", (Choice("on", "On"), Choice("off", "Off")))]
          if current.learning is not None else []),
        environment_option(current.environment, config),
    ]


def environment_option(current: str, config: Config) -> Option:
    from talaria.tools.environments.spec import choices

    names = dict.fromkeys([current, *choices(config.environments)])
    return Option("environment", "Environment", "_talaria_env", current,
                  tuple(Choice(n, n) for n in names))


async def set_option(session: Session, config: Config, option: str, value: object) -> None:
    """Change one option of `session`; raises OptionError (or a ProviderError for a model)."""
    if not isinstance(value, str):
        raise OptionError("the value must be a string")
    if option == "mode":
        value = _editor_mode(value)
        session.permissions.mode = value
        _store(session, mode=value)
    elif option == "model":
        _set_model(session, config, value)
    elif option == "reasoning_effort":
        if value not in EFFORTS:
            raise OptionError(f"unknown effort {value!r}; choose from {', '.join(EFFORTS)}")
        session.reasoning_effort = None if value == "default" else value
    elif option == "exec_mode":
        if value not in EXEC_MODES:
            raise OptionError(f"unknown exec mode {value!r}; choose {' or '.join(EXEC_MODES)}")
        # The session's kernel restarts on its next call: its settings changed.
        state = session.tool_state
        state.exec_settings = replace(state.exec_settings, mode=value)
    elif option == "self_improvement" and session.tool_state.skills is not None:
        if value not in ("on", "off"):
            raise OptionError(f"self_improvement is on or off, not {value!r}")
        session.tool_state.skills.review = value == "on"
    elif option == "environment":
        await _set_environment(session, config, value)
    else:
        raise OptionError(f"unknown config option {option!r}")
    from talaria.agent.events import OptionChanged  # not with the module: `session/new` reads it

    await session.door.emit(OptionChanged(option, value))


async def _set_environment(session: Session, config: Config, value: str) -> None:
    """Move the session to another environment; it is started first, and on failure the
    session stays where it was (OptionError with the one-line cause)."""
    from talaria.tools.environments.base import environment_of, open_environment
    from talaria.tools.environments.spec import resolve
    from talaria.tools.errors import EnvError

    ws = environment_of(session.workspace)
    if ws is None:
        raise OptionError("this session's environment cannot be changed")
    try:
        env = open_environment(resolve(value, config.environments), cwd=session.cwd,
                               session_id=session.id, home=config.home,
                               extra=session.additional_dirs)
        await ws.switch(env)
    except EnvError as exc:
        raise OptionError(f"{exc} (the session stays on {ws.name})") from None
    if session.tool_state.kernel is not None:  # the next script starts where commands now run
        session.tool_state.kernel.discard("the session moved to another environment")


def _editor_mode(value: str) -> str:
    """A mode a user may choose in a session (Claude Code's names too)."""
    try:
        mode: str | None = normalize_mode(value)
    except ValueError:
        mode = None
    if mode not in MODES:
        raise OptionError(f"unknown mode {value!r}; modes: {', '.join(MODES)} "
                          "(bypass is for headless runs: talaria run --yes)")
    return mode


def _set_model(session: Session, config: Config, model: str) -> None:
    from talaria.agent.runtime import make_provider

    name = model.partition(":")[2] if ":" in model else model
    if not name.strip() or model.startswith(":"):
        raise OptionError(f"model {model!r} must look like provider:model")
    session.provider = make_provider(config, model)
    session.context_window = config.window_for(model)
    session.supports_images = config.supports_images(model)
    _store(session, model=model)


def _store(session: Session, **fields: str) -> None:
    if session.store is not None:
        session.store.update_session(session.id, **fields)
