#!/bin/sh
sed -i 's/^port = .*/port = 8080/' /app/app.ini
