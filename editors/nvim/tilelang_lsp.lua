-- tilelang-lsp for Neovim (0.10+): put this file on your runtimepath or `dofile` it from init.lua.
-- Trust: analysis executes your kernel files; set `trusted = false` for code you have not read.
local M = {}

M.init_options = {
  trusted = true,
  defaultTarget = "cuda:sm_90",
  extraTargets = { "hip:gfx942" },
  debounceMs = 150,
  inlayHints = { shape = true, dtype = true, scope = true, layout = true, parameters = true },
}

local function client()
  return vim.lsp.get_clients({ name = "tilelang-lsp", bufnr = 0 })[1]
end

-- Show the IR of `kernel` after a chosen pass in a read-only scratch buffer.
function M.show_ir_after_pass(kernel)
  local lsp = client()
  if not lsp then return end
  local document = { uri = vim.uri_from_bufnr(0) }
  lsp.request("tilelang/passes", { textDocument = document, kernel = kernel }, function(_, listing)
    if not listing then
      vim.notify("tilelang-lsp: no full lowering yet", vim.log.levels.WARN)
      return
    end
    vim.ui.select(listing.passes, { prompt = listing.kernel .. " on " .. listing.target }, function(choice)
      if not choice then return end
      local params = { textDocument = document, kernel = listing.kernel, passName = choice, target = listing.target }
      lsp.request("tilelang/irAfterPass", params, function(_, result)
        if not result or result.error then
          vim.notify("tilelang-lsp: " .. (result and result.error or "no IR"), vim.log.levels.ERROR)
          return
        end
        vim.cmd("vnew")
        local buf = vim.api.nvim_get_current_buf()
        vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(result.text, "\n"))
        vim.api.nvim_buf_set_name(buf, result.uri)
        vim.bo[buf].buftype, vim.bo[buf].modifiable, vim.bo[buf].filetype = "nofile", false, "python"
      end)
    end)
  end)
end

function M.setup(opts)
  opts = opts or {}
  local init_options = vim.tbl_deep_extend("force", M.init_options, opts.init_options or {})
  vim.api.nvim_create_autocmd("FileType", {
    pattern = "python",
    callback = function(args)
      vim.lsp.start({
        name = "tilelang-lsp",
        cmd = opts.cmd or { "tilelang-lsp" },
        root_dir = vim.fs.root(args.buf, { "pyproject.toml", ".git" }),
        init_options = init_options,
        commands = {
          -- Code lens "IR after pass…": arguments are { uri, kernel, target }.
          ["tilelang.showIrAfterPass"] = function(command)
            M.show_ir_after_pass(command.arguments[2])
          end,
        },
        on_attach = function(_, bufnr)
          vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
          vim.lsp.codelens.refresh({ bufnr = bufnr })
          vim.api.nvim_create_autocmd({ "BufEnter", "InsertLeave", "CursorHold" }, {
            buffer = bufnr,
            callback = function() vim.lsp.codelens.refresh({ bufnr = bufnr }) end,
          })
        end,
      })
    end,
  })
  vim.api.nvim_create_user_command("TileLangIr", function(cmd) M.show_ir_after_pass(cmd.args) end, { nargs = "?" })
end

return M
