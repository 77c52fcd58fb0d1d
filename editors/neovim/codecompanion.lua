-- Talaria in CodeCompanion.nvim (https://github.com/olimorris/codecompanion.nvim).
--
-- CodeCompanion launches ACP agents from adapters under `adapters.acp`. This one extends the
-- built-in `goose` ACP adapter (the plain one: no auth method, no special handlers) and only
-- changes its name and the command, so it keeps the handlers of your CodeCompanion version.
-- CodeCompanion advertises fs read/write but no terminal: Talaria then runs commands itself.
require("codecompanion").setup({
  adapters = {
    acp = {
      talaria = function()
        return require("codecompanion.adapters").extend("goose", {
          name = "talaria",
          formatted_name = "Talaria",
          commands = {
            default = { "talaria", "acp" },
          },
          defaults = {
            mcpServers = {},
            timeout = 20000, -- ms to wait for the agent to start and answer `initialize`
          },
          -- Talaria inherits Neovim's environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
          -- Values here can also be "cmd:..." to read a secret, e.g.
          -- OPENAI_API_KEY = "cmd:op read op://personal/OpenAI/credential --no-newline",
          env = {},
        })
      end,
    },
  },
  -- Make Talaria the chat adapter (CodeCompanion versions before `interactions` call this
  -- table `strategies`).
  interactions = {
    chat = {
      adapter = "talaria",
    },
  },
})
