"""Skills in the open Agent Skills format: `NAME/SKILL.md` (YAML frontmatter + markdown body)
with optional `references/`, `templates/`, `scripts/`, `assets/` folders.

`format` parses and checks one SKILL.md, `store` finds skills (user and project) and keeps
every version, `guards` refuses what must not be saved, `manage` does skill_manage's actions,
and `tools` registers `skills_list`, `skill_view` and `skill_manage` (Hermes' names).

May import `talaria.tools.registry`, `.context`, `.redact`, `.lockfile` and PyYAML; never the
agent.
"""
