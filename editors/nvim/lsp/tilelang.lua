-- tilelang-lsp for Neovim 0.11+: with editors/nvim on the runtimepath, `vim.lsp.enable('tilelang')`
-- starts it for Python files. Override fields with `vim.lsp.config('tilelang', {...})`, e.g.
-- `cmd = { '/path/to/.venv/bin/python', '-m', 'tilelang_lsp.cli' }`.
--
-- Trust: analysis executes the kernel's module. The server is told `trusted = true` only for a
-- root in Neovim's trust database (`:TileLangTrust` adds the current root); never by default.
local tilelang = require('tilelang')

---@type vim.lsp.Config
return {
  cmd = { 'tilelang-lsp' },
  filetypes = { 'python' },
  root_markers = tilelang.root_markers,
  -- The server's other options keep their defaults unless set here (docs/lsp.md lists them).
  init_options = {},
  before_init = function(params, config)
    local options = vim.tbl_extend('force', params.initializationOptions or {}, {
      trusted = tilelang.is_trusted(config.root_dir),
    })
    params.initializationOptions = options
  end,
  commands = tilelang.commands,
  handlers = { ['workspace/inlayHint/refresh'] = tilelang.on_inlay_hint_refresh },
  on_attach = tilelang.attach,
}
