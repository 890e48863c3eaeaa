// The hosted login page's security-key step: asks the browser for an assertion of one of the
// user's keys (the options the server put on the button), and posts it with the form.
// Needs the WebAuthn Level 3 JSON methods (Chromium 129+, Firefox 119+, Safari 18.4+).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const button = document.getElementById("use-security-key");
  if (!button) return;
  if (!window.PublicKeyCredential || !PublicKeyCredential.parseRequestOptionsFromJSON) {
    button.hidden = true;
    return;
  }
  button.hidden = false;
  button.addEventListener("click", async () => {
    const form = button.form;
    const status = document.getElementById("security-key-status");
    try {
      const options = JSON.parse(button.dataset.options);
      const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey);
      const credential = await navigator.credentials.get({ publicKey });
      form.elements.webauthn.value = JSON.stringify(credential.toJSON());
      form.elements.code.required = false;
      form.submit();
    } catch (error) {
      status.textContent = "The security key did not answer. Try again, or enter a code.";
    }
  });
});
