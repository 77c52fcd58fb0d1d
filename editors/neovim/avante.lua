-- Talaria in avante.nvim (https://github.com/yetone/avante.nvim), which speaks ACP to any
-- agent listed under `acp_providers`. With lazy.nvim, put the table below in the plugin's
-- `opts` instead of calling setup yourself.
require("avante").setup({
  provider = "talaria",
  acp_providers = {
    ["talaria"] = {
      command = "talaria",
      args = { "acp" },
      env = {
        -- Pass on whichever provider keys you use; unset ones (nil) are simply left out.
        OPENAI_API_KEY = os.getenv("OPENAI_API_KEY"),
        OPENAI_BASE_URL = os.getenv("OPENAI_BASE_URL"),
        ANTHROPIC_API_KEY = os.getenv("ANTHROPIC_API_KEY"),
        TALARIA_HOME = os.getenv("TALARIA_HOME"),
      },
    },
  },
})
