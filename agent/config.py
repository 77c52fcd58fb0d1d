"""Configuration: command-line flag > environment > `$TALARIA_HOME/config.toml` > default.

Every setting is declared once, as a `Config` field made by `setting(default, env, doc,
check)`: that is its only default (sessions, tools and front doors take values from a
Config). `FIELDS` lists them; `load_config` returns the effective values and where each
came from, which is what `talaria config` prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from talaria.agent import config_checks as check
from talaria.agent import config_keys
from talaria.tools.execute_code.env import MODES as EXEC_MODES
from talaria.tools.execute_code.env import TIMEOUT_S as EXEC_TIMEOUT_S
from talaria.tools.home import talaria_home
from talaria.tools.keys import unknown_key
from talaria.tools.mcp.settings import CALL_TIMEOUT_S as MCP_CALL_TIMEOUT_S
from talaria.tools.mcp.settings import START_TIMEOUT_S as MCP_START_TIMEOUT_S
from talaria.tools.web.settings import CACHE_TTL_S as WEB_CACHE_TTL_S
from talaria.tools.web.settings import EXTRACT_BACKENDS, SEARCH_BACKENDS

SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "BRAVE_API_KEY",
              "BRAVE_SEARCH_API_KEY", "TAVILY_API_KEY", "EXA_API_KEY", "FIRECRAWL_API_KEY")
PROVIDER_ENV = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


# Known context windows; `[providers.NAME] context_window` or `context_window` override them.
CONTEXT_WINDOWS = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-5": 400_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "qwen": 32_768,
    "llama": 131_072,
    "deepseek": 128_000,
}
DEFAULT_CONTEXT_WINDOW = 128_000
# Model-name fragments of models that take images; `[providers.NAME] vision = true|false` wins.
VISION_MODELS = ("gpt-4o", "gpt-4.1", "gpt-5", "o3", "o4", "claude", "gemini", "gemma3", "llava",
                 "pixtral", "vision", "-vl", "vl-")


def setting(default: Any, env: str, doc: str, coerce: Callable[[str, Any], Any] = check.text) -> Any:
    """A Config field that is a user setting: its default (the only one), its environment
    variable, what it means, and how a raw value (text from the environment) is checked."""
    return field(default=default, metadata={"env": env, "doc": doc, "coerce": coerce})


TABLES = ("web", "mcp")
"""`[web] search = "brave"` in config.toml is the setting `web_search`, and so on."""


@dataclass(frozen=True, slots=True)
class Config:
    home: Path
    model: str | None = setting(
        None, "TALARIA_MODEL", "Model as provider:model, e.g. openai:gpt-4.1.")
    fallback_models: tuple[str, ...] = setting(
        (), "TALARIA_FALLBACK_MODELS", "Models tried after retries fail.", check.names)
    max_turns: int = setting(90, "TALARIA_MAX_TURNS", "Model calls allowed per prompt.", check.positive)
    mode: str = setting(
        "default", "TALARIA_MODE",
        "Permission mode: default, accept_edits, plan, auto, dont_ask or bypass (Claude Code's "
        "acceptEdits, dontAsk, bypassPermissions too).", check.mode)
    sensitive_paths: tuple[str, ...] = setting(
        (), "TALARIA_SENSITIVE_PATHS",
        "More globs whose reading asks, added to the built-in list (e.g. *.tfstate, ~/.vault-token).",
        check.names)
    sandbox_network: bool = setting(
        False, "TALARIA_SANDBOX_NETWORK",
        "Let commands that run without a question (auto mode, allow always) use the network.",
        check.boolean)
    context_window: int | None = setting(
        None, "TALARIA_CONTEXT_WINDOW", "Context window override, in tokens.", check.positive)
    reasoning_effort: str | None = setting(
        None, "TALARIA_REASONING_EFFORT", "low, medium or high, if supported.",
        check.choice(None, "low", "medium", "high"))
    max_tokens: int = setting(
        8192, "TALARIA_MAX_TOKENS", "Output tokens per model call.", check.positive)
    log_level: str = setting("INFO", "TALARIA_LOG_LEVEL", "Log level for stderr and logs/.")
    compact_threshold: float = setting(
        0.8, "TALARIA_COMPACT_THRESHOLD",
        "Compact the context automatically at this share of the window.", check.share)
    summary_model: str | None = setting(
        None, "TALARIA_SUMMARY_MODEL",
        "Model for compaction summaries (default: the session's model).")
    vision_model: str | None = setting(
        None, "TALARIA_VISION_MODEL",
        "Model that answers vision_analyze for a session model that cannot see images.")
    exec_mode: str = setting(
        EXEC_MODES[0], "TALARIA_EXEC_MODE",
        "execute_code: project (session cwd, project's python) or strict (staging dir).",
        check.choice(*EXEC_MODES))
    exec_timeout: float = setting(
        EXEC_TIMEOUT_S, "TALARIA_EXEC_TIMEOUT", "execute_code wall-clock limit, seconds.",
        check.positive)
    exec_env_passthrough: tuple[str, ...] = setting(
        (), "TALARIA_EXEC_ENV_PASSTHROUGH",
        "Extra environment variables (names or globs) execute_code scripts may see.", check.names)
    self_improvement: bool = setting(
        True, "TALARIA_SELF_IMPROVEMENT",
        "Run the background review that saves skills and memories after a turn.", check.boolean)
    review_model: str | None = setting(
        None, "TALARIA_REVIEW_MODEL",
        "Model for the background review (default: the session's model, with the full replay).")
    skill_review_interval: int = setting(
        10, "TALARIA_SKILL_REVIEW_INTERVAL",
        "Tool calls since the last skill write that trigger a skill review.", check.positive)
    memory_review_interval: int = setting(
        6, "TALARIA_MEMORY_REVIEW_INTERVAL",
        "User turns since the last memory write that trigger a memory review.", check.positive)
    memory_chars: int = setting(
        2200, "TALARIA_MEMORY_CHARS", "Character cap of memories/MEMORY.md (agent notes).",
        check.positive)
    user_chars: int = setting(
        1375, "TALARIA_USER_CHARS", "Character cap of memories/USER.md (user profile).", check.positive)
    project_skill_writes: bool = setting(
        False, "TALARIA_PROJECT_SKILL_WRITES",
        "Let the agent change project skills (.talaria/skills, .agents/skills).", check.boolean)
    skills_curate_days: int = setting(
        30, "TALARIA_SKILLS_CURATE_DAYS",
        "`talaria skills curate` archives agent-written skills unused this many days.", check.positive)
    environment: str = setting(
        "local", "TALARIA_ENVIRONMENT",
        "Where commands run and files live: local, docker, ssh, singularity, modal, daytona, "
        "vercel or a [environments.NAME] table, as NAME or NAME:ARG (ssh:host, docker:image).")
    lsp_unattended_mode: str = setting(
        "dont_ask", "TALARIA_LSP_UNATTENDED_MODE",
        "talaria lsp, for editors that cannot ask (window/showMessageRequest fails): the mode "
        "the session switches to then, unless initializationOptions.mode chose one.",
        check.choice("dont_ask", "plan", "accept_edits", "auto"))
    checkpoints: bool = setting(
        True, "TALARIA_CHECKPOINTS",
        "Snapshot the project before each turn's first change (/undo, /restore, talaria "
        "checkpoints); kept in $TALARIA_HOME/checkpoints, never in the project's own .git.",
        check.boolean)
    subagent_concurrency: int = setting(
        3, "TALARIA_SUBAGENT_CONCURRENCY", "Subagents (delegate_task) running at once.",
        check.positive)
    subagent_max_turns: int = setting(
        30, "TALARIA_SUBAGENT_MAX_TURNS", "Model calls each subagent may make.", check.positive)
    keepalive_s: float = setting(
        45.0, "TALARIA_KEEPALIVE_S",
        "Seconds of silence in a running turn before an empty text chunk keeps editor panels "
        "with idle timeouts from dropping it; 0: off.", check.seconds_or_off)
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`[environments.NAME]` tables: each environment's settings."""
    web_search: str | None = setting(
        None, "TALARIA_WEB_SEARCH",
        "Search backend for web_search: searxng (needs web_endpoint or SEARXNG_URL), brave, "
        "tavily, exa or firecrawl (keys: BRAVE_API_KEY, TAVILY_API_KEY, EXA_API_KEY, "
        "FIRECRAWL_API_KEY). Unset: no web tools.", check.choice(None, *SEARCH_BACKENDS))
    web_extract: str | None = setting(
        None, "TALARIA_WEB_EXTRACT",
        "How web_extract reads pages: local (fetched here), firecrawl or tavily. Unset: local, "
        "offered with web_search.", check.choice(None, *EXTRACT_BACKENDS))
    web_endpoint: str | None = setting(
        None, "TALARIA_WEB_ENDPOINT",
        "Base URL of the search backend: SearXNG's address, or another for the others.")
    web_allow_networks: tuple[str, ...] = setting(
        (), "TALARIA_WEB_ALLOW_NETWORKS",
        "Private networks web_extract and vision_analyze may fetch from (CIDRs, e.g. "
        "127.0.0.0/8); by default only public addresses.", check.networks)
    web_cache_ttl: float = setting(
        WEB_CACHE_TTL_S, "TALARIA_WEB_CACHE_TTL", "Seconds a fetched page is reused.", check.positive)
    mcp_start_timeout: float = setting(
        MCP_START_TIMEOUT_S, "TALARIA_MCP_START_TIMEOUT",
        "Seconds an MCP server may take to start before it is given up.", check.positive)
    mcp_call_timeout: float = setting(
        MCP_CALL_TIMEOUT_S, "TALARIA_MCP_CALL_TIMEOUT", "Seconds one MCP tool call may take.",
        check.positive)
    mcp_script_tools: tuple[str, ...] = setting(
        (), "TALARIA_MCP_SCRIPT_TOOLS",
        "MCP tools execute_code scripts may call: globs over mcp__SERVER__TOOL names. None "
        "by default.", check.names)
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`[mcp_servers.NAME]` tables: command/args/env or url/headers, allow/deny (see
    talaria.tools.mcp.settings)."""
    prices: dict[str, Any] = field(default_factory=dict)
    """`[prices."MODEL"]` tables: dollars per million tokens (talaria.agent.pricing.Price)."""
    skill_set: Path | None = None
    """A skill set's folder, the session's whole skill library in place of `home/skills` and
    the project's (`talaria skills learn`, `talaria batch --skills`; tools/skills/sets.py)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Where each value came from: flag, env VAR, config.toml, default."""
    credentials: dict[str, str] = field(default_factory=dict, repr=False)
    """Keys stored by `talaria setup` in `$TALARIA_HOME/credentials`; the environment wins."""

    def provider_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment providers read: stored credentials under the real environment."""
        return {**self.credentials, **(os.environ if env is None else env)}

    def supports_images(self, model: str | None) -> bool:
        """Whether `model` takes image input: provider table, then known model names."""
        provider, _, name = (model or "").partition(":")
        if provider == "replay":
            return True
        table = self.providers.get(provider, {})
        if "vision" in table:
            return bool(table["vision"])
        return any(fragment in name.lower() for fragment in VISION_MODELS)

    def window_for(self, model: str | None) -> int:
        """The context window of `model`: explicit setting, provider table, known default."""
        if self.context_window:
            return self.context_window
        provider, _, name = (model or "").partition(":")
        table = self.providers.get(provider, {})
        if table.get("context_window"):
            return int(table["context_window"])
        for prefix, window in CONTEXT_WINDOWS.items():
            if name.startswith(prefix):
                return window
        return DEFAULT_CONTEXT_WINDOW


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    env: str
    default: Any
    doc: str
    coerce: Callable[[str, Any], Any]




def load_credentials(home: Path) -> dict[str, str]:
    """`KEY=VALUE` lines of `home/credentials` (written by `talaria setup`, mode 0600).
    Raises ValueError when the file exists but cannot be read."""
    path = home / "credentials"
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    credentials = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key.isidentifier():
            continue  # blank lines, `# comments`
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        credentials[key] = value
    return credentials


def read_config_file(path: Path) -> dict[str, Any]:
    """The tables of a config.toml ({} when it does not exist); ValueError names the file."""
    if not path.is_file():
        return {}
    import tomllib  # here: most starts have no config.toml, and its parser costs ~20 ms

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc


FIELDS: tuple[Field, ...] = tuple(
    Field(f.name, f.metadata["env"], f.default, f.metadata["doc"], f.metadata["coerce"])
    for f in fields(Config) if "env" in f.metadata
)
"""Every setting, in declaration order: what `talaria config` lists."""
FIELD_NAMES = frozenset(f.name for f in FIELDS)


def load_config(
    flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Merge the four layers. Raises ValueError with the file and key on a bad config.toml."""
    env = os.environ if env is None else env
    flags = flags or {}
    home = talaria_home(env)
    # Stored keys sit under the real environment (an exported variable wins). They stay in
    # the Config, not in os.environ, so commands the model runs do not inherit them.
    credentials = load_credentials(home)
    env = {**credentials, **env}
    path = home / "config.toml"
    data = read_config_file(path)
    config_keys.warn(config_keys.problems(data, path, FIELD_NAMES))
    file_values = _flatten(data, path)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for f in FIELDS:
        if flags.get(f.name) is not None:
            raw, source = flags[f.name], "flag"
        elif env.get(f.env):
            raw, source = env[f.env], f"env {f.env}"
        elif f.name in file_values:
            raw, source = file_values[f.name], "config.toml"
        else:
            raw, source = f.default, "default"
        try:
            values[f.name] = f.coerce(f.name, raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad value for {f.name} ({source}): {exc}") from exc
        sources[f.name] = source
    providers = file_values.get("providers", {})
    if not isinstance(providers, dict):
        raise ValueError(f"{path}: [providers] must be a table of tables")
    environments = file_values.get("environments", {})
    if not isinstance(environments, dict) or not all(isinstance(t, dict) for t in environments.values()):
        raise ValueError(f"{path}: [environments] must be a table of tables")
    from talaria.tools.environments.spec import check_name
    from talaria.tools.errors import EnvError

    try:
        check_name(values["environment"], environments)
    except EnvError as exc:
        raise ValueError(f"bad value for environment ({sources['environment']}): {exc}") from None
    servers = file_values.get("mcp_servers", {})
    if not isinstance(servers, dict) or not all(isinstance(t, dict) for t in servers.values()):
        raise ValueError(f"{path}: [mcp_servers.NAME] must be tables (command = ... or url = ...)")
    from talaria.agent.pricing import check_prices

    prices = check_prices(file_values.get("prices", {}), str(path))
    return Config(home=home, providers=providers, environments=environments,
                  mcp_servers=servers, prices=prices, sources=sources, credentials=credentials,
                  **values)


def _flatten(values: dict[str, Any], path: Path) -> dict[str, Any]:
    """`[web] search = x` read as `web_search = x` (see TABLES); an unknown key is an error
    that names the closest known one."""
    out = dict(values)
    for table in TABLES:
        entries = out.pop(table, {})
        if not isinstance(entries, dict):
            raise ValueError(f"{path}: [{table}] must be a table")
        for key, value in entries.items():
            if f"{table}_{key}" not in FIELD_NAMES:
                known = [n.removeprefix(f"{table}_") for n in FIELD_NAMES if n.startswith(f"{table}_")]
                raise ValueError(f"{path}: [{table}] {unknown_key(key, known)}")
            out.setdefault(f"{table}_{key}", value)
    return out


def mask(secret: str) -> str:
    return "(unset)" if not secret else f"{secret[:3]}…{secret[-2:]}" if len(secret) > 8 else "***"


def describe(config: Config, env: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(name, value, source) rows for `talaria config`; secrets masked. A variable set in the
    environment shows `env NAME`; one read from the credentials file shows that file's path."""
    real = os.environ if env is None else env
    env = config.provider_env(env)
    stored = str(config.home / "credentials")

    def origin(name: str) -> str:
        # The environment wins over the file (load_config), and only a non-empty value counts.
        return f"env {name}" if real.get(name) or name not in config.credentials else stored

    rows = [("home", str(config.home), "env TALARIA_HOME" if real.get("TALARIA_HOME") else "default")]
    for f in FIELDS:
        value = getattr(config, f.name)
        shown = ",".join(value) if isinstance(value, tuple) else ("" if value is None else str(value))
        source = config.sources.get(f.name, "default")
        rows.append((f.name, shown, origin(f.env) if source == f"env {f.env}" else source))
    rows.append(("context_window (effective)", str(config.window_for(config.model)), "derived"))
    for name, table in sorted(config.environments.items()):
        for key, value in sorted(table.items()):
            rows.append((f"environments.{name}.{key}", str(value), "config.toml"))
    for name, table in sorted(config.providers.items()):
        for key, value in sorted(table.items()):
            rows.append((f"providers.{name}.{key}", str(value), "config.toml"))
        key_env = table.get("api_key_env")
        if key_env:
            rows.append((f"providers.{name}.api_key", mask(env.get(key_env, "")), origin(key_env)))
    for name, table in sorted(config.mcp_servers.items()):
        where = table.get("command") or table.get("url") or "filters the editor's server"
        rows.append((f"mcp_servers.{name}", str(where), "config.toml"))
    for name in SECRET_ENV:
        if env.get(name):
            rows.append((name, mask(env[name]), origin(name)))
    for name in PROVIDER_ENV:
        if env.get(name):
            rows.append((name, env[name], origin(name)))
    return rows
