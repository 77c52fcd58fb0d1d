#!/bin/sh
echo 'Hello, world!' > /app/hello.txt
