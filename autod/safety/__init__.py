"""The trust boundary on files: what a plan may write and a prompt may read (`boundary`, with the
built-in `protected` lists of credentials and files that run code), secrets in every form a check can
print them (`secretforms`), the modes of the files autod makes (`filemodes`), and terminal-safe text
(`termsafe`). The sandbox of the checks is `autod.checks`; the control socket's peers, `autod.control.socket`.
"""
