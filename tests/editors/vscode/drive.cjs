// Drives VS Code (code-server) in Debian's Chromium through playwright-core for
// tests/editors/test_vscode.py: trusts the workspace, opens the kernel, reads what the editor draws
// (inlay hints, hover, squiggles, the Problems panel, the IR document) and writes it as JSON.
// Usage: node drive.cjs SPEC.json (spec: url, tools, chromium, files, screenshots, output).
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const { chromium } = createRequire(path.join(spec.tools, "package.json"))("playwright-core");
const report = { steps: [], console: [] };

function step(name, detail) {
  report.steps.push({ name, at: Date.now() });
  if (detail !== undefined) report[name] = detail;
}

const nbsp = /\u00a0/g;

// The text of every rendered editor line of the active editor, inlay hints included.
async function editorLines(page) {
  return page.evaluate(() => {
    const editor = document.querySelector(".editor-group-container.active .monaco-editor .view-lines");
    if (!editor) return [];
    const lines = [...editor.querySelectorAll(".view-line")].map((line) => ({
      top: parseFloat(line.style.top || "0"),
      text: line.textContent,
    }));
    return lines.sort((a, b) => a.top - b.top).map((line) => line.text);
  }).then((lines) => lines.map((text) => text.replace(nbsp, " ")));
}

async function waitForLine(page, needle, timeout) {
  const deadline = Date.now() + timeout;
  let lines = [];
  while (Date.now() < deadline) {
    lines = await editorLines(page);
    if (lines.some((line) => line.includes(needle))) return lines;
    await page.waitForTimeout(250);
  }
  throw new Error(`no editor line contains ${JSON.stringify(needle)}; lines:\n${lines.join("\n")}`);
}

// Open a workspace file through Quick Open (Ctrl+P), clicking its own row: the list fills in
// asynchronously, so Enter could pick a stale first row.
async function quickOpen(page, name) {
  const tab = page.locator(`.tab.active[aria-label*="${name}"]`).first();
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(name);
    const row = page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first();
    await row.waitFor();
    await page.waitForTimeout(300);
    await row.click();
    try {
      await tab.waitFor({ timeout: 20000 });
      return;
    } catch (error) {
      if (attempt === 3) throw error;
      await page.keyboard.press("Escape");
    }
  }
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  await input.fill(`>${title}`);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor();
  await page.keyboard.press("Enter");
}

async function main() {
  const browser = await chromium.launch({
    executablePath: spec.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
  page.on("console", (message) => {
    if (message.type() === "error") report.console.push(message.text());
  });
  try {
    await page.goto(spec.url, { timeout: 120000 });
    await page.locator(".monaco-workbench").waitFor({ timeout: 120000 });
    step("workbench");

    // Restricted Mode first: the extension must pass trusted: false, so only source hints show.
    await quickOpen(page, spec.files.kernel);
    await waitForLine(page, "source only", 120000);
    await page.waitForTimeout(spec.settle_ms); // a trusted server would have compiled by now
    step("untrusted_lines", await editorLines(page));
    await page.screenshot({ path: spec.screenshots.untrusted });

    // Trust the workspace the way a user does; the extension restarts the server trusted.
    await runCommand(page, "Workspaces: Manage Workspace Trust");
    const trust = page.getByRole("button", { name: /Trust/ }).first();
    await trust.waitFor({ timeout: 30000 });
    await trust.click();
    step("trusted");
    await page.keyboard.press("Control+W"); // the trust editor
    await quickOpen(page, spec.files.kernel);

    const lines = await waitForLine(page, spec.compiled_marker, 180000);
    step("lines", lines);
    await page.screenshot({ path: spec.screenshots.hints });

    // Hover on a buffer shows its facts and layout: the mouse goes to the token's own characters.
    let hover = "";
    for (let attempt = 0; attempt < 12 && !hover.includes(spec.hover_marker); attempt++) {
      const where = await page.evaluate((token) => {
        const lines = document.querySelectorAll(".editor-group-container.active .view-line");
        for (const line of lines) {
          const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const at = node.textContent.indexOf(token);
            if (at < 0) continue;
            const range = document.createRange();
            range.setStart(node, at + 1);
            range.setEnd(node, at + token.length - 1);
            const box = range.getBoundingClientRect();
            return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
          }
        }
        return null;
      }, spec.hover_token);
      if (!where) throw new Error(`no ${spec.hover_token} in the editor`);
      await page.mouse.move(where.x - 40, where.y + 80);
      await page.mouse.move(where.x, where.y, { steps: 4 });
      const widget = page.locator(".monaco-hover:not(.hidden) .monaco-hover-content").first();
      try {
        await widget.waitFor({ state: "visible", timeout: 5000 });
        await page.waitForTimeout(500);
        hover = (await widget.textContent()).replace(nbsp, " ");
      } catch (error) {
        hover = "";
      }
    }
    step("hover", hover);
    await page.screenshot({ path: spec.screenshots.hover });
    await page.mouse.move(0, 0);
    await page.keyboard.press("Escape");

    // Show IR after pass: the command, then the pass from the quick pick.
    await page.locator(".editor-group-container.active .view-line").first().click();
    await runCommand(page, "TileLang: Show IR after pass");
    const passInput = page.locator('.quick-input-widget input[placeholder*="after which pass"]');
    await passInput.waitFor({ state: "visible", timeout: 180000 }); // after the full lowering
    await passInput.fill(spec.pass);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: spec.pass }).first().waitFor();
    await page.waitForTimeout(300);
    await page.keyboard.press("Enter");
    const irTab = page.locator(`.tab[aria-label*="${spec.pass}"]`).first();
    await irTab.waitFor({ timeout: 120000 });
    step("ir_tab", await irTab.getAttribute("aria-label"));
    step("ir_lines", await waitForLine(page, "@T.prim_func", 60000));
    await page.screenshot({ path: spec.screenshots.ir });

    // A broken kernel: a squiggle at the line and the message in the Problems panel.
    await quickOpen(page, spec.files.broken);
    await page
      .locator(".editor-group-container.active [class*='squiggly-']")
      .first()
      .waitFor({ state: "attached", timeout: 180000 });
    step(
      "squiggles",
      await page.locator(".editor-group-container.active [class*='squiggly-']").evaluateAll((nodes) =>
        nodes.map((node) => node.className)
      )
    );
    await page.keyboard.press("Control+Shift+M");
    const problems = page.locator(".markers-panel .monaco-list-row", { hasText: spec.problem_marker }).first();
    await problems.waitFor({ timeout: 30000 });
    step("problems", (await page.locator(".markers-panel").first().textContent()).replace(nbsp, " "));
    await page.screenshot({ path: spec.screenshots.diagnostics });

    // Trace the kernel at the cursor: the trace opens in passviz in a terminal.
    await quickOpen(page, spec.files.kernel);
    await runCommand(page, "TileLang: Trace the kernel at the cursor");
    let terminal = "";
    const deadline = Date.now() + 180000;
    while (!terminal.includes(spec.trace_marker) && Date.now() < deadline) {
      await page.waitForTimeout(500);
      terminal = await page.evaluate(() =>
        [...document.querySelectorAll(".terminal-wrapper.active .xterm-rows > div")]
          .map((row) => row.textContent)
          .join("\n")
      );
    }
    step("terminal", terminal.replace(nbsp, " "));
    step("terminal_tabs", await page.locator(".terminal-tabs-entry, .single-terminal-tab").allTextContents());
    await page.screenshot({ path: spec.screenshots.trace });

    report.ok = true;
  } catch (error) {
    report.ok = false;
    report.error = String(error && error.stack ? error.stack : error);
    try {
      await page.screenshot({ path: spec.screenshots.failure });
      report.lines_at_failure = await editorLines(page);
    } catch (ignored) {
      // the page itself is gone
    }
  } finally {
    fs.writeFileSync(spec.output, JSON.stringify(report, null, 1));
    await browser.close();
  }
}

main();
