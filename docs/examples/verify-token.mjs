// Verifies a Gatehouse access token in a Node product service, with jose.
//
//     npm install jose
//     GATEHOUSE_URL=https://id.example.com node verify-token.mjs <access token>
//
// Prints the verified claims and what the token may do in its organization, as JSON; exits 1
// with the reason when the token is refused.
import { createRemoteJWKSet, jwtVerify, errors } from "jose";

// Gatehouse's public URL: the tokens' issuer. Its keys are published beside it.
const issuer = process.env.GATEHOUSE_URL.replace(/\/$/, "");
const jwksUrl = process.env.GATEHOUSE_JWKS_URL ?? `${issuer}/.well-known/jwks.json`;
// `gatehouse` for first-party tokens (a sign-in through Gatehouse's /auth/*); a product that
// receives the tokens Gatehouse issues to its OAuth application sets its own client id.
const audience = process.env.GATEHOUSE_AUDIENCE ?? "gatehouse";

// One per process: it caches the keys, and fetches them again (at most once every 30 s) when a
// token names a key id it does not hold (Gatehouse rotated its signing key).
const jwks = createRemoteJWKSet(new URL(jwksUrl), { timeoutDuration: 5000 });

async function verify(token) {
  const { payload } = await jwtVerify(token, jwks, {
    issuer,
    audience,
    algorithms: ["RS256"], // never "none", never HS256
    clockTolerance: 5, // seconds of clock skew on exp and nbf, no more
    requiredClaims: ["exp", "sub"],
  });
  return payload;
}

// Whether the token grants the permission in its organization (org_permissions), to this
// product: a token issued to an OAuth application is for that application's client id only
// (it names `gatehouse` too when it may call Gatehouse's own API).
function can(claims, permission) {
  const intended = claims.client_id ?? "gatehouse";
  return intended === audience && (claims.org_permissions ?? []).includes(permission);
}

try {
  const claims = await verify(process.argv[2]);
  console.log(JSON.stringify({
    sub: claims.sub,
    org_id: claims.org_id ?? null,
    org_role: claims.org_role ?? null,
    can_read_members: can(claims, "organization.members.read"),
    claims,
  }));
} catch (error) {
  if (!(error instanceof errors.JOSEError)) throw error;
  console.error(`refused: ${error.code}: ${error.message}`);
  process.exit(1);
}
