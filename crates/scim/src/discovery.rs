//! The discovery documents (RFC 7644 §4): `/ServiceProviderConfig`, `/ResourceTypes` and
//! `/Schemas`. The `User` and `Group` schemas describe exactly what Gatehouse keeps and
//! renders; `/Schemas` also serves the three schemas of the discovery documents themselves
//! (RFC 7643 §8.7.2), which clients such as scim2-tester require.

use serde_json::{json, Map, Value};

use crate::{
    Resources, GROUP_SCHEMA, LIST_SCHEMA, MAX_RESULTS, RESOURCE_TYPE_SCHEMA, SCHEMA_SCHEMA,
    SERVICE_PROVIDER_CONFIG_SCHEMA, USER_SCHEMA,
};

/// One attribute definition (RFC 7643 §7), built with the defaults of §2.2: single-valued,
/// optional, not case-exact, `readWrite`, returned by default, not unique.
struct Attribute {
    name: &'static str,
    kind: &'static str,
    description: &'static str,
    multi_valued: bool,
    required: bool,
    case_exact: bool,
    mutability: &'static str,
    returned: &'static str,
    uniqueness: &'static str,
    canonical_values: &'static [&'static str],
    reference_types: &'static [&'static str],
    sub_attributes: Vec<Attribute>,
}

fn attribute(name: &'static str, kind: &'static str, description: &'static str) -> Attribute {
    Attribute {
        name,
        kind,
        description,
        multi_valued: false,
        required: false,
        case_exact: false,
        mutability: "readWrite",
        returned: "default",
        uniqueness: "none",
        canonical_values: &[],
        reference_types: &[],
        sub_attributes: Vec::new(),
    }
}

impl Attribute {
    fn required(mut self) -> Self {
        self.required = true;
        self
    }

    fn multi_valued(mut self) -> Self {
        self.multi_valued = true;
        self
    }

    fn case_exact(mut self) -> Self {
        self.case_exact = true;
        self
    }

    fn mutability(mut self, mutability: &'static str) -> Self {
        self.mutability = mutability;
        self
    }

    fn read_only(self) -> Self {
        self.mutability("readOnly")
    }

    fn uniqueness(mut self, uniqueness: &'static str) -> Self {
        self.uniqueness = uniqueness;
        self
    }

    fn canonical(mut self, values: &'static [&'static str]) -> Self {
        self.canonical_values = values;
        self
    }

    fn references(mut self, types: &'static [&'static str]) -> Self {
        self.reference_types = types;
        self
    }

    fn sub(mut self, sub_attributes: Vec<Attribute>) -> Self {
        self.sub_attributes = sub_attributes;
        self
    }

    fn to_json(&self) -> Value {
        let mut definition = Map::new();
        definition.insert("name".into(), self.name.into());
        definition.insert("type".into(), self.kind.into());
        definition.insert("multiValued".into(), self.multi_valued.into());
        definition.insert("description".into(), self.description.into());
        definition.insert("required".into(), self.required.into());
        if !self.canonical_values.is_empty() {
            definition.insert("canonicalValues".into(), json!(self.canonical_values));
        }
        definition.insert("caseExact".into(), self.case_exact.into());
        definition.insert("mutability".into(), self.mutability.into());
        definition.insert("returned".into(), self.returned.into());
        definition.insert("uniqueness".into(), self.uniqueness.into());
        if !self.reference_types.is_empty() {
            definition.insert("referenceTypes".into(), json!(self.reference_types));
        }
        if !self.sub_attributes.is_empty() {
            let subs: Vec<Value> = self.sub_attributes.iter().map(Self::to_json).collect();
            definition.insert("subAttributes".into(), subs.into());
        }
        Value::Object(definition)
    }
}

/// `externalId`: a common attribute (RFC 7643 §3.1), listed in each schema as is common
/// practice, so that clients building models from `/Schemas` know it.
fn external_id() -> Attribute {
    attribute(
        "externalId",
        "string",
        "The identifier of the resource in the provisioning client (the identity provider).",
    )
    .case_exact()
}

fn user_attributes() -> Vec<Attribute> {
    vec![
        attribute(
            "userName",
            "string",
            "Unique identifier for the User, typically their address; unique in the organization but for case.",
        )
        .required()
        .uniqueness("server"),
        external_id(),
        attribute(
            "name",
            "complex",
            "The components of the user's name.",
        )
        .sub(vec![
            attribute(
                "formatted",
                "string",
                "The full name, as displayed (e.g., 'Ms. Barbara J Jensen III').",
            ),
            attribute("familyName", "string", "The family name (e.g., 'Jensen')."),
            attribute("givenName", "string", "The given name (e.g., 'Barbara')."),
        ]),
        attribute("displayName", "string", "The name of the User, suitable for display."),
        attribute(
            "emails",
            "complex",
            "Email addresses for the user; at most 10, at most one primary.",
        )
        .multi_valued()
        .sub(vec![
            attribute("value", "string", "The email address."),
            attribute("type", "string", "A label for the address (e.g., 'work', 'home').")
                .canonical(&["work", "home", "other"]),
            attribute(
                "primary",
                "boolean",
                "Whether this is the user's primary address; true at most once.",
            ),
        ]),
        // Required: Gatehouse always has a value (true when a request leaves it out), and a
        // PATCH cannot remove it (see crate::patch).
        attribute(
            "active",
            "boolean",
            "Whether the user belongs to the organization; false removes them from it. True when a request leaves it out; it cannot be removed.",
        )
        .required(),
    ]
}

fn group_attributes() -> Vec<Attribute> {
    vec![
        attribute(
            "displayName",
            "string",
            "The name of the Group, unique in the organization but for case; what roles are mapped to.",
        )
        .required(),
        external_id(),
        attribute("members", "complex", "The users in the Group (groups are not members).")
            .multi_valued()
            .sub(vec![
                attribute("value", "string", "The id of a User in the Group.")
                    .case_exact()
                    .mutability("immutable"),
                attribute("$ref", "reference", "The URI of the User.")
                    .case_exact()
                    .mutability("immutable")
                    .references(&["User"]),
                attribute("type", "string", "The type of the member: always 'User'.")
                    .mutability("immutable")
                    .canonical(&["User"]),
            ]),
    ]
}

fn service_provider_config_attributes() -> Vec<Attribute> {
    let supported = || {
        attribute(
            "supported",
            "boolean",
            "A Boolean value specifying whether or not the operation is supported.",
        )
        .required()
        .read_only()
    };
    let feature = |name, description| {
        attribute(name, "complex", description)
            .required()
            .read_only()
            .sub(vec![supported()])
    };
    vec![
        attribute(
            "documentationUri",
            "reference",
            "An HTTP-addressable URL pointing to the service provider's human-consumable help documentation.",
        )
        .read_only()
        .references(&["external"]),
        feature("patch", "A complex type that specifies PATCH configuration options."),
        attribute("bulk", "complex", "A complex type that specifies bulk configuration options.")
            .required()
            .read_only()
            .sub(vec![
                supported(),
                attribute("maxOperations", "integer", "An integer value specifying the maximum number of operations.")
                    .required()
                    .read_only(),
                attribute("maxPayloadSize", "integer", "An integer value specifying the maximum payload size in bytes.")
                    .required()
                    .read_only(),
            ]),
        attribute("filter", "complex", "A complex type that specifies FILTER options.")
            .required()
            .read_only()
            .sub(vec![
                supported(),
                attribute("maxResults", "integer", "An integer value specifying the maximum number of resources returned in a response.")
                    .required()
                    .read_only(),
            ]),
        feature("changePassword", "A complex type that specifies configuration options related to changing a password."),
        feature("sort", "A complex type that specifies sort result options."),
        feature("etag", "A complex type that specifies ETag configuration options."),
        attribute("authenticationSchemes", "complex", "A complex type that specifies supported authentication scheme properties.")
            .multi_valued()
            .required()
            .read_only()
            .sub(vec![
                attribute("type", "string", "The authentication scheme.")
                    .required()
                    .read_only()
                    .canonical(&["oauth", "oauth2", "oauthbearertoken", "httpbasic", "httpdigest"]),
                attribute("name", "string", "The common authentication scheme name, e.g., HTTP Basic.")
                    .required()
                    .read_only(),
                attribute("description", "string", "A description of the authentication scheme.")
                    .required()
                    .read_only(),
                attribute("specUri", "reference", "An HTTP-addressable URL pointing to the authentication scheme's specification.")
                    .read_only()
                    .references(&["external"]),
                attribute("documentationUri", "reference", "An HTTP-addressable URL pointing to the authentication scheme's usage documentation.")
                    .read_only()
                    .references(&["external"]),
                attribute("primary", "boolean", "Whether this is the preferred authentication scheme.")
                    .read_only(),
            ]),
    ]
}

fn resource_type_attributes() -> Vec<Attribute> {
    vec![
        attribute("id", "string", "The resource type's server unique id; the same as the 'name' attribute.")
            .read_only(),
        attribute("name", "string", "The resource type name, e.g., 'User'.")
            .required()
            .read_only(),
        attribute("description", "string", "The resource type's human-readable description.")
            .read_only(),
        attribute("endpoint", "reference", "The resource type's HTTP-addressable endpoint relative to the Base URL, e.g., '/Users'.")
            .required()
            .case_exact()
            .read_only()
            .references(&["uri"]),
        attribute("schema", "reference", "The resource type's primary/base schema URI.")
            .required()
            .case_exact()
            .read_only()
            .references(&["uri"]),
        attribute("schemaExtensions", "complex", "A list of URIs of the resource type's schema extensions.")
            .multi_valued()
            .read_only()
            .sub(vec![
                attribute("schema", "reference", "The URI of a schema extension.")
                    .required()
                    .case_exact()
                    .read_only()
                    .references(&["uri"]),
                attribute("required", "boolean", "Whether the schema extension is required for the resource type.")
                    .required()
                    .read_only(),
            ]),
    ]
}

fn schema_attributes() -> Vec<Attribute> {
    let definition = |nested: bool| {
        let mut subs = vec![
            attribute("name", "string", "The attribute's name.")
                .required()
                .case_exact()
                .read_only(),
            attribute("type", "string", "The attribute's data type.")
                .required()
                .read_only()
                .canonical(&[
                    "string",
                    "complex",
                    "boolean",
                    "decimal",
                    "integer",
                    "dateTime",
                    "reference",
                    "binary",
                ]),
            attribute(
                "multiValued",
                "boolean",
                "A Boolean value indicating an attribute's plurality.",
            )
            .required()
            .read_only(),
            attribute(
                "description",
                "string",
                "A human-readable description of the attribute.",
            )
            .case_exact()
            .read_only(),
            attribute(
                "required",
                "boolean",
                "A boolean value indicating whether or not the attribute is required.",
            )
            .read_only(),
            attribute(
                "canonicalValues",
                "string",
                "A collection of canonical values.",
            )
            .multi_valued()
            .case_exact()
            .read_only(),
            attribute(
                "caseExact",
                "boolean",
                "Whether a string attribute is case sensitive.",
            )
            .read_only(),
            attribute(
                "mutability",
                "string",
                "Whether and how an attribute can be modified.",
            )
            .case_exact()
            .read_only()
            .canonical(&["readOnly", "readWrite", "immutable", "writeOnly"]),
            attribute(
                "returned",
                "string",
                "When an attribute and associated values are returned.",
            )
            .case_exact()
            .read_only()
            .canonical(&["always", "never", "default", "request"]),
            attribute(
                "uniqueness",
                "string",
                "How the service provider enforces uniqueness of attribute values.",
            )
            .case_exact()
            .read_only()
            .canonical(&["none", "server", "global"]),
            attribute(
                "referenceTypes",
                "string",
                "The names of the resource types that may be referenced.",
            )
            .multi_valued()
            .case_exact()
            .read_only(),
        ];
        if !nested {
            subs.push(
                attribute(
                    "subAttributes",
                    "complex",
                    "Used to define the sub-attributes of a complex attribute.",
                )
                .multi_valued()
                .read_only()
                .sub(Vec::new()),
            );
        }
        subs
    };
    let mut attributes_definition = definition(false);
    if let Some(sub_attributes) = attributes_definition.last_mut() {
        sub_attributes.sub_attributes = definition(true);
    }
    vec![
        attribute("id", "string", "The unique URI of the schema.")
            .required()
            .case_exact()
            .read_only(),
        attribute("name", "string", "The schema's human-readable name.").read_only(),
        attribute(
            "description",
            "string",
            "The schema's human-readable description.",
        )
        .read_only(),
        attribute(
            "attributes",
            "complex",
            "A complex attribute that includes the attributes of a schema.",
        )
        .multi_valued()
        .required()
        .read_only()
        .sub(attributes_definition),
    ]
}

/// The schemas `/Schemas` serves: id, name, description, attributes.
fn schema_definitions() -> [(&'static str, &'static str, &'static str, Vec<Attribute>); 5] {
    [
        (USER_SCHEMA, "User", "User Account", user_attributes()),
        (GROUP_SCHEMA, "Group", "Group", group_attributes()),
        (
            SERVICE_PROVIDER_CONFIG_SCHEMA,
            "ServiceProviderConfig",
            "Schema for representing the service provider's configuration",
            service_provider_config_attributes(),
        ),
        (
            RESOURCE_TYPE_SCHEMA,
            "ResourceType",
            "Specifies the schema that describes a SCIM resource type",
            resource_type_attributes(),
        ),
        (
            SCHEMA_SCHEMA,
            "Schema",
            "Specifies the schema attributes of a SCIM schema",
            schema_attributes(),
        ),
    ]
}

/// A list response of every item: discovery lists are neither filtered nor paged.
fn list(resources: Vec<Value>) -> Value {
    json!({
        "schemas": [LIST_SCHEMA],
        "totalResults": resources.len(),
        "startIndex": 1,
        "itemsPerPage": resources.len(),
        "Resources": resources,
    })
}

impl Resources {
    /// `/ServiceProviderConfig` (RFC 7643 §5): `PATCH` and filters supported (at most
    /// [`MAX_RESULTS`] results a page); bulk, password changes, sorting and ETags not;
    /// authentication by OAuth bearer token (the organization's SCIM token).
    pub fn service_provider_config(&self) -> Value {
        json!({
            "schemas": [SERVICE_PROVIDER_CONFIG_SCHEMA],
            "patch": {"supported": true},
            "bulk": {"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
            "filter": {"supported": true, "maxResults": MAX_RESULTS},
            "changePassword": {"supported": false},
            "sort": {"supported": false},
            "etag": {"supported": false},
            "authenticationSchemes": [{
                "type": "oauthbearertoken",
                "name": "OAuth Bearer Token",
                "description": "The organization's SCIM token, sent as 'Authorization: Bearer <token>'.",
                "specUri": "https://www.rfc-editor.org/info/rfc6750",
                "primary": true,
            }],
            "meta": {
                "resourceType": "ServiceProviderConfig",
                "location": self.url("ServiceProviderConfig"),
            },
        })
    }

    /// `/ResourceTypes` (RFC 7643 §6): `User` and `Group`, as a list response.
    pub fn resource_types(&self) -> Value {
        list(
            ["User", "Group"]
                .into_iter()
                .filter_map(|id| self.resource_type(id))
                .collect(),
        )
    }

    /// `/ResourceTypes/{id}`: `User` or `Group` (the id without case); `None` for any other.
    pub fn resource_type(&self, id: &str) -> Option<Value> {
        let (id, endpoint, description, schema) = if id.eq_ignore_ascii_case("User") {
            (
                "User",
                "/Users",
                "A person the directory provisions",
                USER_SCHEMA,
            )
        } else if id.eq_ignore_ascii_case("Group") {
            (
                "Group",
                "/Groups",
                "A group of users, mapped to a role",
                GROUP_SCHEMA,
            )
        } else {
            return None;
        };
        Some(json!({
            "schemas": [RESOURCE_TYPE_SCHEMA],
            "id": id,
            "name": id,
            "endpoint": endpoint,
            "description": description,
            "schema": schema,
            "schemaExtensions": [],
            "meta": {
                "resourceType": "ResourceType",
                "location": self.url(&format!("ResourceTypes/{id}")),
            },
        }))
    }

    /// `/Schemas` (RFC 7643 §7): `User`, `Group`, and the schemas of the discovery documents
    /// (`ServiceProviderConfig`, `ResourceType`, `Schema`), as a list response.
    pub fn schemas(&self) -> Value {
        list(
            schema_definitions()
                .iter()
                .map(|(id, name, description, attributes)| {
                    self.schema_document(id, name, description, attributes)
                })
                .collect(),
        )
    }

    /// `/Schemas/{id}`: the schema with this URN (without case); `None` for any other.
    pub fn schema(&self, id: &str) -> Option<Value> {
        schema_definitions()
            .iter()
            .find(|(urn, ..)| urn.eq_ignore_ascii_case(id.trim()))
            .map(|(id, name, description, attributes)| {
                self.schema_document(id, name, description, attributes)
            })
    }

    fn schema_document(
        &self,
        id: &str,
        name: &str,
        description: &str,
        attributes: &[Attribute],
    ) -> Value {
        let attributes: Vec<Value> = attributes.iter().map(Attribute::to_json).collect();
        json!({
            "schemas": [SCHEMA_SCHEMA],
            "id": id,
            "name": name,
            "description": description,
            "attributes": attributes,
            "meta": {
                "resourceType": "Schema",
                "location": self.url(&format!("Schemas/{id}")),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::tests::BASE;

    fn resources() -> Resources {
        Resources::new(BASE)
    }

    fn attribute_names(schema: &Value) -> Vec<&str> {
        schema["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|attribute| attribute["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn the_service_provider_config_announces_patch_and_filter_but_not_bulk() {
        let config = resources().service_provider_config();
        assert_eq!(config["schemas"], json!([SERVICE_PROVIDER_CONFIG_SCHEMA]));
        assert_eq!(config["patch"]["supported"], true);
        assert_eq!(
            config["bulk"],
            json!({"supported": false, "maxOperations": 0, "maxPayloadSize": 0})
        );
        assert_eq!(
            config["filter"],
            json!({"supported": true, "maxResults": 200})
        );
        for unsupported in ["changePassword", "sort", "etag"] {
            assert_eq!(config[unsupported]["supported"], false);
        }
        assert_eq!(
            config["authenticationSchemes"][0]["type"],
            "oauthbearertoken"
        );
        assert_eq!(config["authenticationSchemes"][0]["primary"], true);
        assert_eq!(
            config["meta"]["location"],
            format!("{BASE}/ServiceProviderConfig")
        );
        assert_eq!(config["meta"]["resourceType"], "ServiceProviderConfig");
    }

    #[test]
    fn the_resource_types_are_user_and_group() {
        let types = resources().resource_types();
        assert_eq!(types["schemas"], json!([LIST_SCHEMA]));
        assert_eq!(types["totalResults"], 2);
        assert_eq!(
            types["Resources"][0],
            resources().resource_type("User").unwrap()
        );
        let group = resources().resource_type("group").unwrap();
        assert_eq!(group["endpoint"], "/Groups");
        assert_eq!(group["schema"], GROUP_SCHEMA);
        assert_eq!(
            group["meta"]["location"],
            format!("{BASE}/ResourceTypes/Group")
        );
        assert_eq!(resources().resource_type("Users"), None);
    }

    #[test]
    fn the_user_schema_describes_exactly_what_is_kept() {
        let schema = resources().schema(USER_SCHEMA).unwrap();
        assert_eq!(schema["schemas"], json!([SCHEMA_SCHEMA]));
        assert_eq!(
            schema["meta"]["location"],
            format!("{BASE}/Schemas/{USER_SCHEMA}")
        );
        assert_eq!(
            attribute_names(&schema),
            [
                "userName",
                "externalId",
                "name",
                "displayName",
                "emails",
                "active"
            ]
        );
        assert_eq!(
            schema["attributes"][0],
            json!({
                "name": "userName",
                "type": "string",
                "multiValued": false,
                "description": "Unique identifier for the User, typically their address; unique in the organization but for case.",
                "required": true,
                "caseExact": false,
                "mutability": "readWrite",
                "returned": "default",
                "uniqueness": "server",
            })
        );
        let emails = &schema["attributes"][4];
        assert_eq!(emails["multiValued"], true);
        let subs: Vec<_> = emails["subAttributes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|sub| sub["name"].clone())
            .collect();
        assert_eq!(subs, [json!("value"), json!("type"), json!("primary")]);
        assert_eq!(schema["attributes"][5]["type"], "boolean");
        assert_eq!(schema["attributes"][5]["required"], true);
    }

    #[test]
    fn the_group_schema_has_members_referencing_users() {
        let schema = resources().schema(&GROUP_SCHEMA.to_lowercase()).unwrap();
        assert_eq!(
            attribute_names(&schema),
            ["displayName", "externalId", "members"]
        );
        assert_eq!(schema["attributes"][0]["required"], true);
        let members = &schema["attributes"][2];
        assert_eq!(members["multiValued"], true);
        assert_eq!(members["mutability"], "readWrite");
        assert_eq!(members["subAttributes"][0]["mutability"], "immutable");
        assert_eq!(members["subAttributes"][1]["name"], "$ref");
        assert_eq!(
            members["subAttributes"][1]["referenceTypes"],
            json!(["User"])
        );
    }

    #[test]
    fn the_schemas_list_every_schema_and_each_is_found_by_its_urn() {
        let schemas = resources().schemas();
        assert_eq!(schemas["totalResults"], 5);
        let listed = schemas["Resources"].as_array().unwrap();
        let names: Vec<_> = listed
            .iter()
            .map(|schema| schema["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "User",
                "Group",
                "ServiceProviderConfig",
                "ResourceType",
                "Schema"
            ]
        );
        for schema in listed {
            let id = schema["id"].as_str().unwrap();
            assert_eq!(resources().schema(id).as_ref(), Some(schema));
        }
        assert_eq!(
            resources().schema("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"),
            None
        );
        let schema = resources().schema(SCHEMA_SCHEMA).unwrap();
        let attributes = &schema["attributes"][3]["subAttributes"];
        let sub_attributes = attributes.as_array().unwrap().last().unwrap();
        assert_eq!(sub_attributes["name"], "subAttributes");
        assert_eq!(
            sub_attributes["subAttributes"].as_array().unwrap().len(),
            11
        );
    }

    /// Every definition has the characteristics of RFC 7643 §7, sub-attributes included.
    #[test]
    fn every_definition_is_complete() {
        fn check(definition: &Value) {
            for key in [
                "name",
                "type",
                "multiValued",
                "description",
                "required",
                "caseExact",
                "mutability",
                "returned",
                "uniqueness",
            ] {
                assert!(definition.get(key).is_some(), "{key} in {definition}");
            }
            if definition["type"] == "complex" {
                for sub in definition["subAttributes"].as_array().unwrap() {
                    check(sub);
                }
            }
            if definition["type"] == "reference" {
                assert!(definition["referenceTypes"].is_array(), "{definition}");
            }
        }
        for schema in resources().schemas()["Resources"].as_array().unwrap() {
            for definition in schema["attributes"].as_array().unwrap() {
                check(definition);
            }
        }
    }
}
