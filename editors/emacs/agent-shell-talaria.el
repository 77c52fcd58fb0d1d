;;; agent-shell-talaria.el --- Talaria for agent-shell  -*- lexical-binding: t; -*-

;;; Commentary:
;;
;; Talaria in agent-shell (https://github.com/xenodium/agent-shell), the Emacs ACP client.
;; Load this file after agent-shell (e.g. from your init file, or `:config' of use-package),
;; then start Talaria with M-x agent-shell-talaria-start, or pick "Talaria" in M-x agent-shell.

;;; Code:

(require 'acp)
(require 'agent-shell)

(defcustom agent-shell-talaria-command '("talaria" "acp")
  "Command and arguments that start Talaria as an ACP agent."
  :type '(repeat string)
  :group 'agent-shell)

(defcustom agent-shell-talaria-environment
  ;; agent-shell starts agents with a minimal environment; Talaria needs PATH and the
  ;; provider keys (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...), so inherit Emacs's.
  (agent-shell-make-environment-variables :inherit-env t)
  "Environment variables for the Talaria process."
  :type '(repeat string)
  :group 'agent-shell)

(defun agent-shell-talaria-make-agent-config ()
  "Return the agent-shell configuration that launches Talaria."
  (agent-shell-make-agent-config
   :identifier 'talaria
   :mode-line-name "Talaria"
   :buffer-name "Talaria"
   :shell-prompt "Talaria> "
   :shell-prompt-regexp "Talaria> "
   :client-maker (lambda (buffer)
                   (acp-make-client :command (car agent-shell-talaria-command)
                                    :command-params (cdr agent-shell-talaria-command)
                                    :environment-variables agent-shell-talaria-environment
                                    :context-buffer buffer))
   :install-instructions "Install Talaria so that `talaria' is on your PATH."))

(defun agent-shell-talaria-start ()
  "Start an agent-shell session with Talaria."
  (interactive)
  (agent-shell-start :config (agent-shell-talaria-make-agent-config)))

;; Offer Talaria in M-x agent-shell (when the list is a plain list, not a function).
(unless (functionp agent-shell-agent-configs)
  (add-to-list 'agent-shell-agent-configs (agent-shell-talaria-make-agent-config) t))

(provide 'agent-shell-talaria)

;;; agent-shell-talaria.el ends here
