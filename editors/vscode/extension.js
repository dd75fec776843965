// Starts `tilelang-lsp` and passes workspace trust; plain JavaScript, no build step.
"use strict";

const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

const IR_SCHEME = "tilelang-ir";
let client;
const irDocuments = new Map();

function initializationOptions() {
  const config = vscode.workspace.getConfiguration("tilelang");
  return {
    trusted: vscode.workspace.isTrusted,
    python: config.get("python"),
    defaultTarget: config.get("defaultTarget"),
    extraTargets: config.get("extraTargets"),
    debounceMs: config.get("debounceMs"),
    analysisTimeoutS: config.get("analysisTimeoutS"),
    inlayHints: config.get("inlayHints"),
  };
}

function startClient(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("tilelang").get("server.command");
  client = new LanguageClient(
    "tilelang-lsp",
    "TileLang",
    { command, args },
    {
      documentSelector: [{ scheme: "file", language: "python" }],
      initializationOptions: initializationOptions(),
    }
  );
  context.subscriptions.push(client);
  return client.start();
}

async function showIrAfterPass(uri, kernel, target) {
  const document = { uri: uri || vscode.window.activeTextEditor?.document.uri.toString() };
  const listing = await client.sendRequest("tilelang/passes", { textDocument: document, kernel, target });
  if (!listing) {
    vscode.window.showWarningMessage("TileLang: no full lowering yet for this kernel.");
    return;
  }
  const choice = await vscode.window.showQuickPick(listing.passes, { placeHolder: `${listing.kernel} on ${listing.target}` });
  if (!choice) return;
  const result = await client.sendRequest("tilelang/irAfterPass", {
    textDocument: document, kernel: listing.kernel, passName: choice, target: listing.target,
  });
  if (!result || result.error) {
    vscode.window.showErrorMessage(`TileLang: ${result ? result.error : "no IR"}`);
    return;
  }
  irDocuments.set(result.uri, result.text);
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(result.uri));
  await vscode.window.showTextDocument(doc, { preview: true, viewColumn: vscode.ViewColumn.Beside });
}

function activate(context) {
  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(IR_SCHEME, {
      provideTextDocumentContent: (uri) => irDocuments.get(uri.toString()) ?? "",
    }),
    vscode.commands.registerCommand("tilelang.showIrAfterPass", showIrAfterPass),
    vscode.commands.registerCommand("tilelang.restartServer", async () => {
      await client?.stop();
      await startClient(context);
    }),
    // Trust is granted once per workspace: restart so the server may compile kernels.
    vscode.workspace.onDidGrantWorkspaceTrust(async () => {
      await client?.stop();
      await startClient(context);
    })
  );
  return startClient(context);
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
