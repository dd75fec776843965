// VS Code client for tilelang-lsp: starts the server from the user's interpreter, passes workspace
// trust, and adds the commands the code lenses use. Plain JavaScript, no build step.
"use strict";

const path = require("path");
const { execFile, spawn } = require("child_process");
const vscode = require("vscode");
const { LanguageClient, RevealOutputChannelOn } = require("vscode-languageclient/node");

const IR_SCHEME = "tilelang-ir";
const TRACE_KERNEL = "tilelang.traceKernel"; // a server command (workspace/executeCommand)
const SHOW_IR = "tilelang.showIrAfterPass"; // a client command: the lens and the palette use it

let extensionContext;
let watchingPython = false;
let client;
let interpreter; // the interpreter the running server was started with, or undefined
let startedWith; // command, arguments and options of the running server, to tell real changes
let outputChannel;
let starting = Promise.resolve();
const irDocuments = new Map();
const irChanged = new vscode.EventEmitter();
const declinedInstall = new Set(); // interpreters the user said "Not now" for, this session

function settings() {
  return vscode.workspace.getConfiguration("tilelang");
}

// The Python extension's interpreter for this workspace, when it is installed. Not used in an
// untrusted workspace: its interpreter may be a virtual environment inside the workspace.
async function pythonExtensionInterpreter() {
  const python = vscode.extensions.getExtension("ms-python.python");
  if (!python || !vscode.workspace.isTrusted) return undefined;
  try {
    const api = python.isActive ? python.exports : await python.activate();
    const environments = api && api.environments;
    if (!environments) return undefined;
    if (!watchingPython && environments.onDidChangeActiveEnvironmentPath) {
      watchingPython = true;
      extensionContext.subscriptions.push(
        environments.onDidChangeActiveEnvironmentPath(() => {
          if (!settings().get("python") && settings().get("server.command").length === 0) restart();
        })
      );
    }
    const resource = vscode.window.activeTextEditor?.document.uri ?? vscode.workspace.workspaceFolders?.[0]?.uri;
    const active = environments.getActiveEnvironmentPath(resource);
    const resolved = await environments.resolveEnvironment(active);
    return resolved?.executable?.uri?.fsPath ?? active?.path;
  } catch (error) {
    outputChannel.appendLine(`Could not ask the Python extension for its interpreter: ${error}`);
    return undefined;
  }
}

// The interpreter the user picked: the `tilelang.python` setting, else the Python extension's
// active environment, else `python3` from PATH. Returns [path, where it came from].
async function pickInterpreter() {
  const configured = settings().get("python");
  if (configured) return [configured, "the tilelang.python setting"];
  const fromExtension = await pythonExtensionInterpreter();
  if (fromExtension) return [fromExtension, "the Python extension's active environment"];
  return ["python3", "the default (python3 on PATH)"];
}

function initializationOptions(workerPython) {
  const config = settings();
  const options = {
    trusted: vscode.workspace.isTrusted,
    defaultTarget: config.get("defaultTarget"),
    extraTargets: config.get("extraTargets"),
    debounceMs: config.get("debounceMs"),
    analysisTimeoutS: config.get("analysisTimeoutS"),
    workerMemoryLimitMb: config.get("workerMemoryLimitMb"),
    hintWaitS: config.get("hintWaitS"),
    backgroundDelayMs: config.get("backgroundDelayMs"),
    summary: config.get("summary"),
    raceCheck: config.get("raceCheck"),
    traceDir: config.get("traceDir"),
    inlayHints: config.get("inlayHints"),
  };
  if (workerPython) options.python = workerPython;
  return options;
}

// How the server is started with the current settings: command, arguments, initialization options.
async function serverLaunch() {
  const [python, source] = await pickInterpreter();
  const override = settings().get("server.command") || [];
  const logLevel = settings().get("server.logLevel");
  if (override.length > 0) {
    // A server installed elsewhere (pipx, another venv): its worker still uses tilelang.python.
    const workerPython = settings().get("python") || undefined;
    return {
      command: override[0],
      args: [...override.slice(1), "--log-level", logLevel],
      options: initializationOptions(workerPython),
      interpreter: workerPython,
      source,
    };
  }
  return {
    command: python,
    args: ["-m", "tilelang_lsp.cli", "--log-level", logLevel],
    options: initializationOptions(undefined),
    interpreter: python,
    source,
  };
}

// Trust is left out: its own event restarts the server.
function launchKey(launch) {
  const { trusted, ...options } = launch.options;
  return JSON.stringify([launch.command, launch.args, options]);
}

async function createClient() {
  const launch = await serverLaunch();
  const { command, args, source } = launch;
  interpreter = launch.interpreter;
  startedWith = launchKey(launch);
  outputChannel.appendLine(
    `Starting ${[command, ...args].join(" ")} (interpreter from ${source}; ` +
      `workspace ${vscode.workspace.isTrusted ? "trusted" : "not trusted: kernels are not compiled"})`
  );
  return new LanguageClient(
    "tilelang",
    "TileLang",
    { command, args, options: { env: { ...process.env, PYTHONUNBUFFERED: "1" } } },
    {
      documentSelector: [{ scheme: "file", language: "python" }],
      initializationOptions: launch.options,
      outputChannel,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      middleware: {
        // The Trace lens runs the server's command; open what it wrote in passviz as well.
        executeCommand: async (name, commandArgs, next) => {
          const result = await next(name, commandArgs);
          if (name === TRACE_KERNEL) openInPassviz(result);
          return result;
        },
      },
    }
  );
}

// Whether `python` has the server: "yes", "missing" (Python says there is no tilelang_lsp
// module), or "unknown" (no such interpreter, or another failure: the start reports it). Asked
// with the environment and folder the server is started with, so the answer is the server's.
function serverInstalled(python) {
  return new Promise((resolve) => {
    execFile(python, ["-c", "import tilelang_lsp"], { timeout: 60000 }, (error, _stdout, stderr) => {
      if (!error) resolve("yes");
      else resolve(/No module named '?tilelang_lsp'?/.test(String(stderr)) ? "missing" : "unknown");
    });
  });
}

// Asks (never installs silently) to run `python -m pip install tilelang-devtools`, showing pip's
// output in the TileLang channel. True when pip succeeded.
async function offerInstall(python) {
  if (declinedInstall.has(python)) return false;
  const choice = await vscode.window.showWarningMessage(
    `TileLang: the language server (tilelang-devtools) is not installed for ${python}. ` +
      "Install it with pip into that interpreter?",
    "Install",
    "Not now"
  );
  if (choice !== "Install") {
    declinedInstall.add(python);
    outputChannel.appendLine(`Not installing tilelang-devtools for ${python}; the server is not started.`);
    return false;
  }
  const args = ["-m", "pip", "install", "tilelang-devtools"];
  outputChannel.appendLine(`Running ${[python, ...args].join(" ")}`);
  const code = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "TileLang: pip install tilelang-devtools…" },
    () =>
      new Promise((resolve) => {
        const child = spawn(python, args, { env: process.env });
        child.stdout.on("data", (data) => outputChannel.append(String(data)));
        child.stderr.on("data", (data) => outputChannel.append(String(data)));
        child.on("error", (error) => {
          outputChannel.appendLine(String(error));
          resolve(-1);
        });
        child.on("close", (exitCode) => resolve(exitCode));
      })
  );
  if (code !== 0) {
    vscode.window.showErrorMessage(
      `TileLang: pip install tilelang-devtools failed (exit ${code}); see the TileLang output.`
    );
    return false;
  }
  outputChannel.appendLine("tilelang-devtools installed; starting the server.");
  return true;
}

async function start() {
  const launch = await serverLaunch();
  // Only the default launch (INTERPRETER -m tilelang_lsp.cli) is ours to check and fix.
  if (launch.command === launch.interpreter && (await serverInstalled(launch.command)) === "missing") {
    if (!(await offerInstall(launch.command))) return;
  }
  client = await createClient();
  try {
    await client.start();
  } catch (error) {
    outputChannel.appendLine(`tilelang-lsp did not start: ${error}`);
    vscode.window.showErrorMessage(
      `TileLang: the language server did not start (${error}). Is tilelang-devtools installed in the ` +
        "interpreter? Set tilelang.python, or see the TileLang output."
    );
  }
}

// Serialize restarts: trust, settings and the command can ask for one at the same time (granting
// trust also changes the restricted settings). A request while one is still queued joins it.
let queuedRestart;
function restart() {
  if (queuedRestart) return queuedRestart;
  const run = starting.then(async () => {
    queuedRestart = undefined;
    if (client) {
      try {
        await client.stop(8000); // the server stops its worker first
      } catch (error) {
        outputChannel.appendLine(`Stopping the server: ${error}`);
      }
      client = undefined;
    }
    await start();
  });
  queuedRestart = run;
  starting = run.catch(() => undefined);
  return run;
}

function runningClient() {
  if (!client || !client.isRunning()) {
    vscode.window.showWarningMessage("TileLang: the language server is not running.");
    return undefined;
  }
  return client;
}

// The kernel at the cursor, from the server's code lenses: [uri, kernel, target] of the nearest
// kernel that starts at or above the cursor (else the file's first kernel).
async function kernelAtCursor() {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== "python") {
    vscode.window.showWarningMessage("TileLang: open a kernel file first.");
    return undefined;
  }
  const lenses = await vscode.commands.executeCommand("vscode.executeCodeLensProvider", editor.document.uri);
  const ours = (lenses || []).filter((lens) => lens.command && lens.command.command === TRACE_KERNEL);
  if (ours.length === 0) {
    vscode.window.showWarningMessage("TileLang: no analyzed kernel in this file yet.");
    return undefined;
  }
  const line = editor.selection.active.line;
  const above = ours.filter((lens) => lens.range.start.line <= line);
  const lens = above.length > 0 ? above[above.length - 1] : ours[0];
  return lens.command.arguments;
}

function openInPassviz(result) {
  if (!result || !result.output) return;
  const terminalOptions = { name: `passviz ${path.basename(result.output)}` };
  if (interpreter) {
    terminalOptions.shellPath = interpreter;
    terminalOptions.shellArgs = ["-m", "passviz.cli", result.output];
  } else {
    terminalOptions.shellPath = "passviz";
    terminalOptions.shellArgs = [result.output];
  }
  const terminal = vscode.window.createTerminal(terminalOptions);
  terminal.show();
}

async function traceCurrentKernel() {
  const lsp = runningClient();
  const kernel = lsp && (await kernelAtCursor());
  if (!kernel) return undefined;
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `TileLang: tracing ${kernel[1]}…` },
    () => lsp.sendRequest("workspace/executeCommand", { command: TRACE_KERNEL, arguments: kernel })
  );
  if (!result || result.error) {
    vscode.window.showErrorMessage(`TileLang: no trace (${result ? result.error : "is the workspace trusted?"})`);
    return result;
  }
  openInPassviz(result);
  return result;
}

// From a code lens: (uri, kernel, target). From the palette: the kernel at the cursor.
async function showIrAfterPass(uri, kernel, target, passName) {
  const lsp = runningClient();
  if (!lsp) return undefined;
  if (!uri) {
    const atCursor = await kernelAtCursor();
    if (!atCursor) return undefined;
    [uri, kernel, target] = atCursor;
  }
  const document = { uri };
  const listing = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Window, title: "TileLang: lowering the whole pipeline…" },
    () => lsp.sendRequest("tilelang/passes", { textDocument: document, kernel, target })
  );
  if (!listing) {
    vscode.window.showWarningMessage("TileLang: no full lowering for this kernel (does it compile?).");
    return undefined;
  }
  const choice =
    passName ||
    (await vscode.window.showQuickPick(listing.passes, {
      placeHolder: `IR of ${listing.kernel} on ${listing.target} after which pass?`,
    }));
  if (!choice) return undefined;
  const result = await lsp.sendRequest("tilelang/irAfterPass", {
    textDocument: document,
    kernel: listing.kernel,
    passName: choice,
    target: listing.target,
  });
  if (!result || result.error) {
    vscode.window.showErrorMessage(`TileLang: ${result ? result.error : "no IR"}`);
    return undefined;
  }
  const irUri = vscode.Uri.parse(result.uri);
  irDocuments.set(irUri.toString(), result.text);
  irChanged.fire(irUri); // the same pass again after an edit: show the new text
  const doc = await vscode.workspace.openTextDocument(irUri);
  await vscode.languages.setTextDocumentLanguage(doc, "python");
  await vscode.window.showTextDocument(doc, { preview: true, viewColumn: vscode.ViewColumn.Beside });
  return result.uri;
}

function activate(context) {
  extensionContext = context;
  outputChannel = vscode.window.createOutputChannel("TileLang");
  context.subscriptions.push(
    outputChannel,
    irChanged,
    vscode.workspace.registerTextDocumentContentProvider(IR_SCHEME, {
      onDidChange: irChanged.event,
      provideTextDocumentContent: (uri) => irDocuments.get(uri.toString()) ?? "",
    }),
    vscode.commands.registerCommand(SHOW_IR, showIrAfterPass),
    vscode.commands.registerCommand("tilelang.traceCurrentKernel", traceCurrentKernel),
    // An explicit restart asks about installing the server again after a "Not now".
    vscode.commands.registerCommand("tilelang.restartServer", () => {
      declinedInstall.clear();
      return restart();
    }),
    vscode.commands.registerCommand("tilelang.showOutput", () => outputChannel.show(true)),
    // The server reads trust once, at initialize: restart it so it may compile kernels.
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      outputChannel.appendLine("Workspace trusted: restarting the server.");
      return restart();
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration("tilelang")) return;
      // Granting trust fires this too (restricted settings): restart only when the launch changes.
      if (startedWith === launchKey(await serverLaunch())) return;
      outputChannel.appendLine("TileLang settings changed: restarting the server.");
      restart();
    })
  );
  return restart();
}

async function deactivate() {
  await starting;
  return client ? client.stop(8000) : undefined;
}

module.exports = { activate, deactivate };
