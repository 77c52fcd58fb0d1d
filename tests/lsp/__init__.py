"""`talaria lsp`: a real server process driven by pytest-lsp's client (and a real Neovim)."""
