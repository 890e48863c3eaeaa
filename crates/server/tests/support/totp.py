"""The authenticator app of the MFA tests: prints the TOTP code of a base32 secret, computed by
pyotp (RFC 6238: SHA-1, six digits, 30-second steps), `steps` steps from now (0 = now, -1 = the
previous window, ...). Waits for the next step first when the current one is about to end, so
that the server, asked a moment later, is still in the same step.

    python totp.py SECRET [STEPS]
"""

import sys
import time

import pyotp

secret = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 0
into_step = time.time() % 30
if into_step > 25:
    time.sleep(30 - into_step + 0.2)
print(pyotp.TOTP(secret).at(time.time() + 30 * steps))
