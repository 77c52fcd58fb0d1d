-- Talaria as a language server in Neovim's built-in LSP client (Neovim 0.11+), no plugin.
-- Source it from your init.lua (or copy it there): `dofile("/path/to/editors/neovim/lsp.lua")`.
-- Code actions (`gra`) offer "Fix with Talaria" on diagnostics, "Ask Talaria about this" and
-- "Refactor with Talaria" on a selection; the commands below work on the visual selection.

vim.lsp.config("talaria", {
  cmd = { "talaria", "lsp" },
  root_markers = { ".git", "pyproject.toml", "package.json", "Cargo.toml", "go.mod" },
  -- initializationOptions: the permission mode ("default" asks before edits and commands)
  -- and, optionally, the model ("provider:model").
  init_options = { mode = "default" },
})
vim.lsp.enable("talaria")

local function talaria()
  local client = vim.lsp.get_clients({ bufnr = 0, name = "talaria" })[1]
  if client == nil then
    vim.notify("Talaria is not attached to this buffer (see :checkhealth vim.lsp)", vim.log.levels.WARN)
  end
  return client
end

local function run(command, arguments)
  local client = talaria()
  if client ~= nil then
    client:exec_cmd({ title = command, command = command, arguments = arguments }, { bufnr = 0 })
  end
end

-- The lines a command was given (`:'<,'>TalariaFix`), else the cursor's line.
local function target(opts)
  local first, last = opts.line1, opts.line2
  local text = vim.api.nvim_buf_get_lines(0, last - 1, last, false)[1] or ""
  return {
    uri = vim.uri_from_bufnr(0),
    range = { start = { line = first - 1, character = 0 }, ["end"] = { line = last - 1, character = #text } },
  }
end

vim.api.nvim_create_user_command("TalariaAsk", function(opts)
  run("talaria.ask", opts.range > 0 and { opts.args, target(opts) } or { opts.args })
end, { nargs = "+", range = true, desc = "Ask Talaria (about the selection, if any)" })

vim.api.nvim_create_user_command("TalariaFix", function(opts)
  local diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(0)) do
    if d.lnum + 1 >= opts.line1 and d.lnum + 1 <= opts.line2 and d.user_data and d.user_data.lsp then
      table.insert(diagnostics, d.user_data.lsp)
    end
  end
  local arg = target(opts)
  arg.diagnostics = diagnostics
  run("talaria.fix", { arg })
end, { range = true, desc = "Fix the problems in the selection with Talaria" })

vim.api.nvim_create_user_command("TalariaExplain", function(opts)
  run("talaria.explain", { target(opts) })
end, { range = true, desc = "Explain the selection" })

vim.api.nvim_create_user_command("TalariaCancel", function()
  run("talaria.cancel", {})
end, { desc = "Stop Talaria's running request" })

vim.api.nvim_create_user_command("TalariaNewSession", function()
  run("talaria.newSession", {})
end, { desc = "Start a new Talaria conversation" })

-- The answer streams as `talaria/update` notifications (shaped like ACP session/update);
-- the whole answer opens as a markdown transcript when the request ends.
vim.lsp.handlers["talaria/update"] = function(_, params)
  local update = params and params.update or {}
  if update.sessionUpdate == "tool_call" then
    vim.api.nvim_echo({ { "Talaria: " .. (update.title or "tool"), "Comment" } }, false, {})
  end
end
