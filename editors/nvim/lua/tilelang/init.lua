-- tilelang-lsp in Neovim 0.11+: workspace trust through Neovim's own trust database, the IR after a
-- pass in a read-only buffer, and traces opened in passviz. `lsp/tilelang.lua` is the LSP config.
local M = {}

M.name = 'tilelang'
M.root_markers = { 'pyproject.toml', '.git' }

local function realpath(path)
  return path and vim.uv.fs_realpath(vim.fs.normalize(path)) or nil
end

local function notify(message, level)
  vim.notify('tilelang-lsp: ' .. message, level or vim.log.levels.INFO)
end

--- Whether {root} is a trusted directory in Neovim's trust database ($XDG_STATE_HOME/nvim/trust,
--- the one `:trust` and 'exrc' use). Reads the database without prompting: `vim.secure.read()`
--- would open a dialog for an unknown directory.
---@param root string?
---@return boolean
function M.is_trusted(root)
  local full = realpath(root)
  if not full then
    return false
  end
  local database = io.open(vim.fn.stdpath('state') .. '/trust', 'r')
  if not database then
    return false
  end
  local trusted = false
  for line in database:lines() do
    local hash, path = line:match('^(%S+) (.+)$')
    if path == full then
      trusted = hash == 'directory'
    end
  end
  database:close()
  return trusted
end

--- Add {root} to Neovim's trust database as a trusted directory, or remove it.
---@param root string
---@param action 'allow'|'remove'
---@return boolean ok
---@return string full path or error message
function M.set_trust(root, action)
  local full = realpath(root)
  if not full or vim.fn.isdirectory(full) == 0 then
    return false, 'not a directory: ' .. tostring(root)
  end
  if action == 'remove' then
    return vim.secure.trust({ action = 'remove', path = full })
  end
  -- Newer Neovim takes a path for 'allow'; 0.11 takes only a buffer, whose name may be a
  -- directory (it is then trusted by name, as `:trust` in a directory buffer does).
  local ok, trusted, message = pcall(vim.secure.trust, { action = 'allow', path = full })
  if ok then
    return trusted, message
  end
  local existed = vim.fn.bufexists(full) == 1
  local buf = vim.fn.bufadd(full)
  trusted, message = vim.secure.trust({ action = 'allow', bufnr = buf })
  if not existed then
    vim.api.nvim_buf_delete(buf, { force = true })
  end
  return trusted, message
end

--- The root a buffer's tilelang client has, else the one the config would pick, else the cwd.
---@param bufnr integer
---@return string
function M.root_of(bufnr)
  local client = vim.lsp.get_clients({ name = M.name, bufnr = bufnr })[1]
  return (client and client.root_dir) or vim.fs.root(bufnr, M.root_markers) or vim.fn.getcwd()
end

--- Stop the tilelang clients (of {root} only, when given) and start them again on their buffers;
--- `before_init` then reads the trust database afresh.
---@param root string?
function M.restart(root)
  local full = realpath(root)
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    if not full or realpath(client.root_dir) == full then
      local buffers = vim.tbl_keys(client.attached_buffers)
      local config = vim.tbl_extend('force', vim.lsp.config[M.name], { root_dir = client.root_dir })
      local id = client.id
      client:stop()
      local waited = 0
      local function start_again()
        -- vim.lsp.start would reuse a client that is still shutting down.
        if vim.lsp.get_client_by_id(id) and waited < 10000 then
          waited = waited + 50
          return vim.defer_fn(start_again, 50)
        end
        for _, buf in ipairs(buffers) do
          if vim.api.nvim_buf_is_valid(buf) then
            vim.lsp.start(config, { bufnr = buf })
          end
        end
      end
      start_again()
    end
  end
end

--- `:TileLangTrust [dir]` (`!` to take the trust back): the root of the current buffer by default.
function M.trust_command(opts)
  local root = opts.args ~= '' and opts.args or M.root_of(0)
  local ok, result = M.set_trust(root, opts.bang and 'remove' or 'allow')
  if not ok then
    return notify(result, vim.log.levels.ERROR)
  end
  notify((opts.bang and 'no longer trusted: ' or 'trusted (kernels there are compiled): ') .. result)
  M.restart(result)
end

local function client_of(bufnr)
  local client = vim.lsp.get_clients({ name = M.name, bufnr = bufnr })[1]
  if not client then
    notify('not running for this buffer', vim.log.levels.WARN)
  end
  return client
end

--- Calls {callback}(uri, kernel, target) with the kernel at the cursor: the nearest kernel whose
--- code lens is at or above the cursor, else the file's first one. {kernel} wins when given.
local function with_kernel(client, bufnr, kernel, callback)
  local uri = vim.uri_from_bufnr(bufnr)
  if kernel and kernel ~= '' then
    return callback(uri, kernel, nil)
  end
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  client:request('textDocument/codeLens', { textDocument = { uri = uri } }, function(err, lenses)
    local best
    for _, lens in ipairs(err == nil and lenses or {}) do
      if lens.command and lens.command.command == 'tilelang.traceKernel' then
        if not best or lens.range.start.line <= line then
          best = lens
        end
      end
    end
    if not best then
      return notify('no analyzed kernel in this file yet', vim.log.levels.WARN)
    end
    callback(unpack(best.command.arguments))
  end, bufnr)
end

-- The buffer that shows {uri}: found again by a buffer variable, so opening the same pass twice
-- reuses it instead of failing on an existing buffer name.
local function ir_buffer(uri)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(buf) and vim.b[buf].tilelang_ir_uri == uri then
      return buf
    end
  end
  local buf = vim.api.nvim_create_buf(true, true)
  vim.b[buf].tilelang_ir_uri = uri
  if not pcall(vim.api.nvim_buf_set_name, buf, uri) then
    vim.api.nvim_buf_set_name(buf, uri .. '#' .. buf)
  end
  return buf
end

local function show_ir(result)
  local buf = ir_buffer(result.uri)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(result.text, '\n', { plain = true }))
  vim.bo[buf].modifiable, vim.bo[buf].modified, vim.bo[buf].filetype = false, false, 'python'
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    vim.cmd('vsplit')
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, buf)
  end
  vim.api.nvim_set_current_win(win)
  return buf
end

--- Show the IR of a kernel after a pass in a read-only buffer beside the kernel. {opts}: `kernel`
--- (default: the one at the cursor), `target`, `pass` (default: pick with vim.ui.select),
--- `on_done(buf)` called with the IR buffer.
function M.show_ir_after_pass(opts)
  opts = opts or {}
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_of(bufnr)
  if not client then
    return
  end
  with_kernel(client, bufnr, opts.kernel, function(uri, kernel, target)
    local document = { uri = uri }
    local params = { textDocument = document, kernel = kernel, target = opts.target or target }
    client:request('tilelang/passes', params, function(err, listing)
      if err or not listing then
        return notify('no full lowering of ' .. tostring(kernel) .. ' (does it compile?)', vim.log.levels.WARN)
      end
      local function open(choice)
        if not choice then
          return
        end
        local request = { textDocument = document, kernel = listing.kernel, passName = choice, target = listing.target }
        client:request('tilelang/irAfterPass', request, function(ir_err, result)
          if ir_err or not result or result.error then
            local reason = ir_err and ir_err.message or (result and result.error) or 'no IR'
            return notify(reason, vim.log.levels.ERROR)
          end
          local buf = show_ir(result)
          if opts.on_done then
            opts.on_done(buf)
          end
        end, bufnr)
      end
      if opts.pass then
        return open(opts.pass)
      end
      vim.ui.select(listing.passes, { prompt = listing.kernel .. ' on ' .. listing.target .. ', IR after:' }, open)
    end, bufnr)
  end)
end

-- passviz from the server's environment: `python -m passviz.cli`, or the passviz beside tilelang-lsp.
local function passviz_command(client, trace)
  local cmd = client.config.cmd
  if type(cmd) == 'table' and cmd[2] == '-m' then
    return { cmd[1], '-m', 'passviz.cli', trace }
  end
  if type(cmd) == 'table' and cmd[1]:match('tilelang%-lsp$') then
    local beside = vim.fs.joinpath(vim.fs.dirname(cmd[1]), 'passviz')
    if vim.fn.executable(beside) == 1 then
      return { beside, trace }
    end
  end
  return { 'passviz', trace }
end

--- Trace a kernel through the whole pipeline (the server's `tilelang.traceKernel`) and open the
--- trace in passviz in a terminal. {opts}: `kernel`, `target` (default: the kernel at the cursor).
function M.trace_kernel(opts)
  opts = opts or {}
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_of(bufnr)
  if not client then
    return
  end
  with_kernel(client, bufnr, opts.kernel, function(uri, kernel, target)
    local command = { command = 'tilelang.traceKernel', arguments = { uri, kernel, opts.target or target } }
    notify('tracing ' .. kernel .. '…')
    client:request('workspace/executeCommand', command, function(err, result)
      if err or not result or result.error or not result.output then
        local reason = err and err.message or (result and result.error) or 'is the workspace trusted?'
        return notify('no trace: ' .. reason, vim.log.levels.ERROR)
      end
      vim.cmd('botright new')
      vim.fn.jobstart(passviz_command(client, result.output), { term = true })
      vim.cmd('startinsert')
    end, bufnr)
  end)
end

--- `workspace/inlayHint/refresh` for the tilelang client: hints asked for again from a clean state.
---
--- Neovim 0.11's own handler keeps the hints it has and marks their lines to be drawn again before
--- it asks; a redraw that comes before the answer (one the diagnostics just published schedule,
--- say) draws the old hints and marks the lines as drawn for this buffer version, so the new hints
--- are stored but never drawn: the editor keeps "source only: analyzing" until the next edit. It
--- also skips buffers not shown in a window. Enabling again drops the stored hints (a redraw before
--- the answer leaves the old ones on screen and marks nothing) and asks at once.
function M.on_inlay_hint_refresh(err, _, ctx)
  if err then
    return vim.NIL
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  for bufnr in pairs(client and client.attached_buffers or {}) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.lsp.inlay_hint.is_enabled({ bufnr = bufnr }) then
      vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
    end
  end
  return vim.NIL
end

--- Client-side handlers for the commands the code lenses carry ({uri, kernel, target}).
M.commands = {
  ['tilelang.showIrAfterPass'] = function(command)
    M.show_ir_after_pass({ kernel = command.arguments[2], target = command.arguments[3] })
  end,
  ['tilelang.traceKernel'] = function(command)
    M.trace_kernel({ kernel = command.arguments[2], target = command.arguments[3] })
  end,
}

--- What `on_attach` does: inlay hints and code lenses on for the buffer.
---@param client vim.lsp.Client
---@param bufnr integer
function M.attach(client, bufnr)
  vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
  if client:supports_method('textDocument/codeLens') then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
    vim.api.nvim_create_autocmd({ 'BufEnter', 'InsertLeave', 'CursorHold' }, {
      group = vim.api.nvim_create_augroup('tilelang.codelens.' .. bufnr, { clear = true }),
      buffer = bufnr,
      callback = function()
        vim.lsp.codelens.refresh({ bufnr = bufnr })
      end,
    })
  end
end

return M
