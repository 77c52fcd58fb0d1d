;;; talaria-lsp-mode.el --- Talaria as a language server for lsp-mode -*- lexical-binding: t -*-

;;; Commentary:
;; Registers `talaria lsp' with lsp-mode as an add-on server: it runs next to each buffer's
;; usual server, offering code actions ("Fix with Talaria", "Ask Talaria about this",
;; "Refactor with Talaria") and the commands below.

;;; Code:
(require 'lsp-mode)

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection '("talaria" "lsp"))
  :activation-fn (lambda (_file-name _mode) t)
  :add-on? t
  :server-id 'talaria
  :initialization-options (lambda () (list :mode "default"))))

(defun talaria-lsp--target ()
  "The active region, or the current line, as Talaria's {uri, range} argument."
  (let ((beg (if (use-region-p) (region-beginning) (line-beginning-position)))
        (end (if (use-region-p) (region-end) (line-end-position))))
    (list :uri (lsp--buffer-uri)
          :range (list :start (lsp-point-to-position beg) :end (lsp-point-to-position end)))))

(defun talaria-lsp-ask (prompt)
  "Ask Talaria PROMPT about the region (or the current line)."
  (interactive "sAsk Talaria: ")
  (lsp-workspace-command-execute "talaria.ask" (vector prompt (talaria-lsp--target))))

(defun talaria-lsp-fix ()
  "Fix the problems in the region (or the current line)."
  (interactive)
  (lsp-workspace-command-execute "talaria.fix" (vector (talaria-lsp--target))))

(defun talaria-lsp-cancel ()
  "Stop Talaria's running request."
  (interactive)
  (lsp-workspace-command-execute "talaria.cancel" []))

(provide 'talaria-lsp-mode)
;;; talaria-lsp-mode.el ends here
