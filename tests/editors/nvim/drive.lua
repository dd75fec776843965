-- Drives a headless Neovim through editors/nvim (lsp/tilelang.lua, plugin/, lua/tilelang) for
-- tests/editors/test_nvim.py. The spec (JSON, $TILELANG_NVIM_SPEC) says what to open and do; what
-- Neovim really got and drew is written as JSON to spec.output, then Neovim quits.
local spec = vim.json.decode(table.concat(vim.fn.readfile(vim.env.TILELANG_NVIM_SPEC), '\n'))

vim.g.loaded_python3_provider = 0 -- else every .py buffer probes for a Python provider
vim.o.lines, vim.o.columns = 80, 200 -- inlay hints are drawn for the visible lines only
vim.opt.runtimepath:prepend(spec.plugin)

local report = { steps = {}, messages = {}, deprecated = {}, files = {} }

-- spec.redraw_before_hints: every hint answer is stored only after a full redraw, the order a
-- quiet machine gave by chance (diagnostics published just before a refresh schedule one), made
-- certain. Neovim 0.11's own refresh handler then draws the old hints again, marks their lines as
-- drawn for this buffer version and never draws the answer.
if spec.redraw_before_hints then
  local store = vim.lsp.handlers['textDocument/inlayHint']
  vim.lsp.handlers['textDocument/inlayHint'] = function(err, result, ctx, config)
    vim.cmd('redraw!')
    return store(err, result, ctx, config)
  end
end

local failed = false

-- Any deprecated API our config calls lands here (Neovim's own code calls none of them).
vim.deprecate = function(name, alternative)
  table.insert(report.deprecated, { name = name, alternative = alternative, trace = debug.traceback() })
end
-- Our own messages arrive here, the server's window/showMessage through the handler below.
vim.notify = function(message, level)
  table.insert(report.messages, { message = message, level = level })
end
local show_message = vim.lsp.handlers['window/showMessage']
vim.lsp.handlers['window/showMessage'] = function(err, params, ctx)
  -- LSP's MessageType counts down (1 error ... 4 log); vim.log.levels count up (4 error ... 1 debug).
  table.insert(report.messages, { message = params.message, level = 5 - params.type, lsp = true })
  return show_message(err, params, ctx)
end

local function step(name, ok, detail)
  table.insert(report.steps, { name = name, ok = ok, detail = detail })
  if not ok then
    failed = true
  end
  return ok
end

local function finish()
  vim.fn.writefile({ vim.json.encode(report) }, spec.output)
  if failed then
    vim.cmd('cquit! 1')
  else
    vim.cmd('qall!')
  end
end

local function hint_namespace()
  return vim.api.nvim_get_namespaces()['nvim.lsp.inlayhint']
end

-- The inlay hints drawn in {buf}: {line (0-based) = {text, ...}} from the extmarks of Neovim's
-- inlay-hint namespace, i.e. what a user sees.
local function drawn_hints(buf)
  local hints = {}
  local ns = hint_namespace()
  if not ns then
    return hints
  end
  vim.cmd('redraw')
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local text = {}
    for _, chunk in ipairs(mark[4].virt_text or {}) do
      table.insert(text, chunk[1])
    end
    local line = tostring(mark[2])
    hints[line] = hints[line] or {}
    table.insert(hints[line], table.concat(text))
  end
  return hints
end

local function count(tbl)
  local n = 0
  for _ in pairs(tbl) do
    n = n + 1
  end
  return n
end

local function client_of(buf)
  return vim.lsp.get_clients({ name = 'tilelang', bufnr = buf })[1]
end

local function open(path)
  vim.cmd.edit(vim.fn.fnameescape(path))
  local buf = vim.api.nvim_get_current_buf()
  local attached = vim.wait(30000, function()
    local client = client_of(buf)
    return client ~= nil and client.initialized == true
  end, 50)
  step('attach ' .. vim.fs.basename(path), attached)
  return buf
end

-- Wait until a drawn hint on some line contains {needle}; returns the drawn hints.
local function wait_for_hints(buf, needle, timeout)
  local hints = {}
  local found = vim.wait(timeout, function()
    hints = drawn_hints(buf)
    for _, texts in pairs(hints) do
      for _, text in ipairs(texts) do
        if not needle or text:find(needle, 1, true) then
          return true
        end
      end
    end
    return false
  end, 200)
  return found, hints
end

local function requested_hints(buf)
  local lines = vim.api.nvim_buf_line_count(buf)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = 0, character = 0 }, ['end'] = { line = lines, character = 0 } },
  }
  local answers = vim.lsp.buf_request_sync(buf, 'textDocument/inlayHint', params, 20000) or {}
  local labels = {}
  for _, answer in pairs(answers) do
    for _, hint in ipairs(answer.result or {}) do
      local label = hint.label
      if type(label) == 'table' then
        local parts = {}
        for _, part in ipairs(label) do
          table.insert(parts, part.value)
        end
        label = table.concat(parts)
      end
      table.insert(labels, { line = hint.position.line, label = label })
    end
  end
  return labels
end

local function worker_status(buf)
  local answer = client_of(buf):request_sync('tilelang/workerStatus', {}, 10000, buf)
  return answer and answer.result
end

local function diagnostics(buf)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(out, { line = d.lnum, severity = d.severity, code = d.code, source = d.source, message = d.message })
  end
  return out
end

-- Hints, diagnostics, code lenses and IR after a pass on a trusted root.
local function trusted_scenario()
  vim.cmd('TileLangTrust ' .. vim.fn.fnameescape(spec.root))
  local gemm = open(spec.kernel)
  local ok, hints = wait_for_hints(gemm, spec.compiled_marker, 120000)
  step('compiled hints drawn', ok, hints)
  report.hints = hints
  report.requested = requested_hints(gemm)
  report.worker = worker_status(gemm)

  -- The lenses need the background full lowering; the server asks for a refresh when it is done.
  local lensed = false
  for _ = 1, 60 do
    vim.lsp.codelens.refresh({ bufnr = gemm })
    lensed = vim.wait(1000, function()
      return #vim.lsp.codelens.get(gemm) >= 3
    end, 100)
    if lensed then
      break
    end
  end
  report.lenses = {}
  for _, lens in ipairs(vim.lsp.codelens.get(gemm)) do
    table.insert(report.lenses, { line = lens.range.start.line, title = lens.command and lens.command.title })
  end
  step('code lenses', lensed, report.lenses)

  -- The same pass twice: the second must reuse the buffer, not fail on its name.
  report.ir = {}
  for attempt = 1, 2 do
    vim.api.nvim_set_current_buf(gemm)
    local shown
    require('tilelang').show_ir_after_pass({
      pass = spec.pass,
      on_done = function(buf)
        shown = buf
      end,
    })
    local done = vim.wait(120000, function()
      return shown ~= nil
    end, 100)
    step('IR after ' .. spec.pass .. ' #' .. attempt, done)
    if shown then
      table.insert(report.ir, {
        buf = shown,
        name = vim.api.nvim_buf_get_name(shown),
        modifiable = vim.bo[shown].modifiable,
        text = table.concat(vim.api.nvim_buf_get_lines(shown, 0, -1, false), '\n'),
      })
    end
    vim.cmd('only')
  end

  -- Trace: the server writes the trace, passviz shows it in a terminal buffer.
  vim.api.nvim_set_current_buf(gemm)
  require('tilelang').trace_kernel()
  local terminal
  local traced = vim.wait(120000, function()
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.bo[buf].buftype == 'terminal' then
        terminal = buf
        local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
        if text:find(spec.pass, 1, true) then
          return true
        end
      end
    end
    return false
  end, 200)
  step('trace opened in passviz', traced)
  report.trace = {
    terminal = terminal and vim.api.nvim_buf_get_name(terminal),
    screen = terminal and vim.api.nvim_buf_get_lines(terminal, 0, -1, false),
    files = vim.fn.glob(spec.root .. '/.tilelang-lsp/*.trace.jsonl', false, true),
  }
  if terminal then
    vim.fn.jobstop(vim.bo[terminal].channel)
  end
  vim.cmd('stopinsert')
  vim.cmd('only')

  local broken = open(spec.broken)
  local got = vim.wait(120000, function()
    return #vim.diagnostic.get(broken) > 0
  end, 200)
  step('diagnostics on the broken kernel', got)
  report.diagnostics = diagnostics(broken)
  report.broken_hints = drawn_hints(broken)
end

-- An untrusted root: source-only hints, no worker, the module never imported. Then :TileLangTrust.
local function untrusted_scenario()
  local buf = open(spec.kernel)
  local ok, hints = wait_for_hints(buf, nil, 60000)
  step('source hints drawn', ok, hints)
  vim.wait(spec.settle_ms) -- time in which a trusted server would have imported the module
  report.untrusted = {
    hints = drawn_hints(buf),
    worker = worker_status(buf),
    marker_exists = vim.uv.fs_stat(spec.marker) ~= nil,
    trusted_in_database = require('tilelang').is_trusted(spec.root),
  }

  vim.cmd('TileLangTrust')
  local compiled = wait_for_hints(buf, spec.compiled_marker, 120000)
  step('compiled hints after :TileLangTrust', compiled)
  report.trusted = {
    hints = drawn_hints(buf),
    worker = worker_status(buf),
    marker_exists = vim.uv.fs_stat(spec.marker) ~= nil,
    trusted_in_database = require('tilelang').is_trusted(spec.root),
    database = vim.fn.readfile(vim.fn.stdpath('state') .. '/trust'),
  }
end

vim.api.nvim_create_autocmd('VimEnter', {
  once = true,
  nested = true, -- so :edit fires FileType, which starts the client
  callback = function()
    vim.lsp.config('tilelang', { cmd = spec.cmd })
    vim.lsp.enable('tilelang')
    local ok, err = xpcall(spec.scenario == 'untrusted' and untrusted_scenario or trusted_scenario, debug.traceback)
    step('scenario ran', ok, err)
    report.lsp_log = vim.lsp.get_log_path()
    finish()
  end,
})
