-- User commands of tilelang-lsp (the LSP config itself is lsp/tilelang.lua).
if vim.g.loaded_tilelang then
  return
end
vim.g.loaded_tilelang = true

local function tilelang()
  return require('tilelang')
end

vim.api.nvim_create_user_command('TileLangTrust', function(opts)
  tilelang().trust_command(opts)
end, { nargs = '?', bang = true, complete = 'dir', desc = 'Trust this root for tilelang-lsp (! to untrust)' })

vim.api.nvim_create_user_command('TileLangIr', function(opts)
  tilelang().show_ir_after_pass({ kernel = opts.fargs[1], pass = opts.fargs[2] })
end, { nargs = '*', desc = 'IR of the kernel at the cursor (or [kernel] [pass]) after a pass' })

vim.api.nvim_create_user_command('TileLangTrace', function(opts)
  tilelang().trace_kernel({ kernel = opts.fargs[1] })
end, { nargs = '?', desc = 'Trace the kernel at the cursor and open it in passviz' })

vim.api.nvim_create_user_command('TileLangRestart', function()
  tilelang().restart()
end, { desc = 'Restart tilelang-lsp' })
