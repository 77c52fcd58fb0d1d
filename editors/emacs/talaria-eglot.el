;;; talaria-eglot.el --- Talaria as a language server for Eglot -*- lexical-binding: t -*-

;;; Commentary:
;; Registers `talaria lsp' with Eglot (built into Emacs 29+; from ELPA before) for a few major modes, and adds
;; commands that call Talaria's `workspace/executeCommand' commands on the region.
;; Eglot runs one server per mode and project: a mode listed here uses Talaria *instead of*
;; its usual server, so list only modes you want Talaria for (or use lsp-mode, which runs
;; several servers side by side: talaria-lsp-mode.el).

;;; Code:
(require 'eglot)

(defvar talaria-eglot-modes '(python-mode python-ts-mode markdown-mode text-mode)
  "Major modes whose Eglot server is Talaria.")

(add-to-list 'eglot-server-programs
             `(,talaria-eglot-modes . ("talaria" "lsp"
                                        :initializationOptions (:mode "default"))))

(defun talaria-eglot--target (beg end)
  "The region BEG..END as Talaria's {uri, range} argument."
  (list :uri (if (fboundp 'eglot-path-to-uri)         ; Emacs 30; before: eglot--path-to-uri
                 (eglot-path-to-uri (buffer-file-name))
               (eglot--path-to-uri (buffer-file-name)))
        :range (list :start (eglot--pos-to-lsp-position beg)
                     :end (eglot--pos-to-lsp-position end))))

(defun talaria-eglot-ask (prompt &optional beg end)
  "Ask Talaria PROMPT, about the region from BEG to END when it is active."
  (interactive (append (list (read-string "Ask Talaria: "))
                       (when (use-region-p) (list (region-beginning) (region-end)))))
  (eglot-execute-command (eglot--current-server-or-lose) "talaria.ask"
                         (vconcat (list prompt)
                                  (when beg (list (talaria-eglot--target beg end))))))

(defun talaria-eglot-explain (beg end)
  "Explain the region from BEG to END."
  (interactive "r")
  (eglot-execute-command (eglot--current-server-or-lose) "talaria.explain"
                         (vector (talaria-eglot--target beg end))))

(defun talaria-eglot-cancel ()
  "Stop Talaria's running request."
  (interactive)
  (eglot-execute-command (eglot--current-server-or-lose) "talaria.cancel" []))

(provide 'talaria-eglot)
;;; talaria-eglot.el ends here
