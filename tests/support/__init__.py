"""What more than one test module uses: harnesses, crews, stand-ins."""
