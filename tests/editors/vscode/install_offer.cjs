// Drives VS Code (code-server) for tests/editors/test_vscode_install.py: the interpreter has no
// tilelang-devtools, so the extension must ask before installing it. Answers "Not now" first
// (nothing may start or be installed), then restarts the server and answers "Install", and waits
// for the hints of the server pip installed. Writes what it saw as JSON.
// Usage: node install_offer.cjs SPEC.json (spec: url, tools, chromium, kernel, output, screenshot).
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const { chromium } = createRequire(path.join(spec.tools, "package.json"))("playwright-core");
const report = { steps: [] };
const nbsp = /\u00a0/g;

async function editorLines(page) {
  const lines = await page.evaluate(() =>
    [...document.querySelectorAll(".editor-group-container.active .monaco-editor .view-lines .view-line")]
      .map((line) => ({ top: parseFloat(line.style.top || "0"), text: line.textContent }))
      .sort((a, b) => a.top - b.top)
      .map((line) => line.text)
  );
  return lines.map((text) => text.replace(nbsp, " "));
}

// The notification whose text contains `needle`: its text, after clicking its `button`.
async function answer(page, needle, button, timeout) {
  const toast = page.locator(".notification-toast", { hasText: needle }).first();
  await toast.waitFor({ state: "visible", timeout });
  const text = (await toast.locator(".notification-list-item-message").first().textContent()).replace(nbsp, " ");
  await toast.getByRole("button", { name: button, exact: true }).click();
  return text;
}

async function main() {
  const browser = await chromium.launch({
    executablePath: spec.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
  try {
    await page.goto(spec.url, { timeout: 120000 });
    await page.locator(".monaco-workbench").waitFor({ timeout: 120000 });
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(spec.kernel);
    const row = page.locator(".quick-input-list .monaco-list-row", { hasText: spec.kernel }).first();
    await row.waitFor();
    await page.waitForTimeout(300);
    await row.click();

    report.first_offer = await answer(page, "not installed", "Not now", 120000);
    await page.waitForTimeout(spec.settle_ms); // a server started anyway would have drawn hints
    report.lines_after_not_now = await editorLines(page);

    await page.keyboard.press("F1");
    await input.waitFor({ state: "visible" });
    await input.fill(">TileLang: Restart language server");
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "Restart language server" }).first().waitFor();
    await page.keyboard.press("Enter");
    report.second_offer = await answer(page, "not installed", "Install", 120000);

    const deadline = Date.now() + 240000;
    let lines = [];
    while (Date.now() < deadline && !lines.some((line) => line.includes(spec.hint_marker))) {
      await page.waitForTimeout(500);
      lines = await editorLines(page);
    }
    report.lines_after_install = lines;
    await page.screenshot({ path: spec.screenshot });
    report.ok = lines.some((line) => line.includes(spec.hint_marker));
    if (!report.ok) report.error = `no line with ${JSON.stringify(spec.hint_marker)} after the install`;
  } catch (error) {
    report.ok = false;
    report.error = String(error && error.stack ? error.stack : error);
    try {
      await page.screenshot({ path: spec.screenshot });
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
