// SkriptND for VS Code: the TextMate grammar highlights; everything else comes from the
// language server `sknd lsp` (the skriptnd Python package), started over stdio.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function createClient() {
  const config = vscode.workspace.getConfiguration("skriptnd");
  const command = config.get("server.command", "sknd");
  const args = config.get("server.args", ["lsp"]);
  const serverOptions = {
    run: { command, args, transport: TransportKind.stdio },
    debug: { command, args, transport: TransportKind.stdio },
  };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "skriptnd" },
      { scheme: "untitled", language: "skriptnd" },
    ],
    synchronize: {
      // modules changed on disk (e.g. by `sknd fmt` or git) are re-read by the server
      fileEvents: vscode.workspace.createFileSystemWatcher("**/*.sknd"),
    },
  };
  return new LanguageClient("skriptnd", "SkriptND", serverOptions, clientOptions);
}

async function start() {
  client = createClient();
  try {
    await client.start();
  } catch (err) {
    vscode.window.showErrorMessage(
      `SkriptND: could not start the language server (${err}). ` +
        "Install the skriptnd package, or set 'skriptnd.server.command' to its sknd executable."
    );
  }
}

async function restart() {
  if (client) {
    await client.stop();
  }
  await start();
}

async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("skriptnd.restartServer", restart),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("skriptnd.server")) {
        restart();
      }
    })
  );
  await start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
